"""Which mechanism holds the ceilings here, decided once at server start.

``limits.mechanism = "auto"`` takes the first that works, in this order (why:
docs/decisions.md, "Ceilings"):

1. ``cgroup_v2``: the server's own v2 group is delegated to it (a unit with
   ``Delegate=yes``, as ``orcr service install`` writes) and offers memory and
   pids. Files only, no other process involved, every ceiling and reading the
   kernel has.
2. ``systemd``: a systemd user manager whose group has the memory and pids
   controllers: one ``systemd-run --user --scope`` per agent.
3. ``cgroup_v1``: the memory, pids and cpu controllers mounted writable (root).
4. ``none``: admission-only protection; runs that ask for a ceiling are refused.

Naming a mechanism (``cgroup_v2``, ``systemd``, ``cgroup_v1``) uses that one
or none, with the reason. Only ``cgroup_v1`` has run against a real kernel;
the reason of the other two says what they were tested against.
"""

from __future__ import annotations

from orcr_core.ceilings import Detected

#: what each mechanism was tested against (shown by doctor and server status)
TESTED = {
    "cgroup_v1": "tested on a real kernel",
    "cgroup_v2": "tested only against a mimic of the v2 files, never on a real kernel",
    "systemd": "tested only against a fake systemd-run/systemctl, never a real systemd",
}
ORDER = ("cgroup_v2", "systemd", "cgroup_v1")


def _try(mechanism: str, instance: str) -> tuple[Detected | None, str]:
    """The backend for ``mechanism`` if it works here, else (None, why not)."""
    if mechanism == "cgroup_v2":
        from orcr_core.ceilings import v2

        why = v2.unusable()
        if why is None:
            group = v2.CgroupV2(instance)
            where = f"delegated group {group.base} ({' '.join(group.controllers)})"
            return Detected(group, mechanism, f"{where}; {TESTED[mechanism]}"), ""
        return None, why
    if mechanism == "systemd":
        from orcr_core import dirs
        from orcr_core.ceilings import systemd

        why = systemd.unusable()
        if why is None:
            scopes = systemd.SystemdScopes(instance, dirs.data_dir() / "ceilings" / "systemd")
            where = f"systemd user manager, scopes under {scopes.slice}"
            return Detected(scopes, mechanism, f"{where}; {TESTED[mechanism]}"), ""
        return None, why
    from orcr_core.ceilings import v1

    why = v1.unusable()
    if why is None:
        where = "memory, pids and cpu controllers"
        return Detected(v1.CgroupV1(instance), mechanism, f"{where}; {TESTED[mechanism]}"), ""
    return None, why


def detect(config, instance: str) -> Detected:
    want = config.get("limits.mechanism", "auto")
    if want == "none":
        return Detected(None, "none", "limits.mechanism = none")
    tried = []
    for mechanism in ORDER if want == "auto" else (want,):
        found, why = _try(mechanism, instance)
        if found is not None:
            return found
        tried.append(f"{mechanism}: {why}")
    fix = (
        "run the server under `orcr service install` (a unit with Delegate=yes) on a "
        "cgroup v2 host, or as root with the cgroup v1 memory, pids and cpu controllers"
    )
    head = "" if want == "auto" else f"limits.mechanism = {want}, but "
    return Detected(None, "none", f"{head}{'; '.join(tried)}; fix: {fix}")
