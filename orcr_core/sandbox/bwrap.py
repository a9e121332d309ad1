"""The bubblewrap engine: a policy as a ``bwrap`` argv (docs/sandbox.md).

The mounts, in order (a later mount covers an earlier one):

1. the whole system read-only (``--ro-bind / /``), a fresh ``/dev`` and ``/proc``
   (the agent's own pid namespace: it sees and signals no process outside);
2. empty tmpfs over ``/tmp`` (private per agent), the home directory and ``/run`` (its
   sockets stay connectable on a read-only mount);
3. the allowed paths bound back: ``allow_read`` read-only; the agent's cwd, its
   own data dir, its provider's state paths and ``allow_write`` read-write;
4. orcr's own dirs hidden again (the store, the config, the socket, every agent's
   checkout), after the binds so that no allowed path (a cwd of ``~``) exposes them,
   then the agent's own data dir and checkout bound back when they lie inside, and
   the folder of its own orcr socket (``/run/orcr``: the server knows each agent by
   the socket a connection arrives on, orcr_core/server/agent_sockets.py);
5. the deny list last, so it wins over anything allowed: an empty tmpfs over a
   directory, ``/dev/null`` over a file.

The network: with no ``allow_net`` the agent has a network namespace of its own (its
own loopback, nothing else: not the machine's loopback either); ``*`` keeps the
machine's network. Capabilities are dropped and the sandbox dies with its parent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

INSTALL = (
    "install bubblewrap: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap "
    "(Fedora), pacman -S bubblewrap (Arch); macOS has no bubblewrap (docs/sandbox.md)"
)
USERNS = (
    "unprivileged user namespaces look disabled: sysctl kernel.unprivileged_userns_clone=1, "
    "or on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor "
    "profile for bwrap"
)

_probed: dict[str, tuple[float, str | None]] = {}
#: a failed probe is retried after this long (an install takes effect without a restart)
RETRY_AFTER = 10.0


def binary(program: str = "bwrap") -> str | None:
    """The engine's absolute path, or None."""
    found = shutil.which(program)
    return os.path.abspath(found) if found else None


def unavailable(program: str = "bwrap") -> str | None:
    """Why no sandbox can start here (the engine's error and what to do), or None.

    Probes once by starting a real one (a missing binary, disabled user namespaces,
    a seccomp filter that forbids mounts all show only then); a success is cached
    for the process, a failure for :data:`RETRY_AFTER` seconds."""
    now = time.monotonic()
    cached = _probed.get(program)
    if cached and (cached[1] is None or now - cached[0] < RETRY_AFTER):
        return cached[1]
    why = _probe(program)
    _probed[program] = (now, why)
    return why


def _probe(program: str) -> str | None:
    path = binary(program)
    if path is None:
        return f"the sandbox engine bubblewrap ({program}) is not installed; {INSTALL}"
    try:
        out = subprocess.run(
            [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--unshare-net", "--die-with-parent", "--", "true"],
            capture_output=True, text=True, timeout=15,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({path}) could not start a sandbox: {exc}; {INSTALL}"
    if out.returncode != 0:
        err = (out.stderr or out.stdout).strip().splitlines()
        detail = err[-1] if err else f"exit {out.returncode}"
        hint = USERNS if "namespace" in detail or "uid map" in detail or "ermi" in detail else ""
        return f"bubblewrap ({path}) could not start a sandbox: {detail}" + (
            f"; {hint}" if hint else ""
        )
    return None


def _real(path: str) -> str:
    return os.path.realpath(path)


def argv(
    *,
    engine: str,
    cwd: str,
    home: str,
    hide: list[str],
    read: list[str],
    write: list[str],
    deny: list[str],
    net: list[str],
    command: list[str],
    own: tuple[str, ...] = (),
    socket: tuple[str, str] | None = None,
    keep: tuple[str, ...] = (),
) -> list[str]:
    """The ``bwrap`` argv running ``command`` (module docstring: the mounts, in order).

    ``socket``: (the folder of the agent's own orcr socket, where it is seen inside):
    bound read-only (a connect works, a replace does not) after orcr's dirs are
    hidden, with ``ORCR_SOCKET`` naming it inside. ``keep``: files in a writable folder
    bound read-only over themselves (orcr's ``launch.json`` in the agent's data dir:
    what its next start runs; a bound file can be neither written nor replaced)."""
    out = [engine, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--cap-drop", "ALL"]  # fmt: skip
    shared_net = net == ["*"]
    if not shared_net:
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    covers = [home] if home not in ("", "/") else []
    covers += [p for p in hide if p == "/run"]
    for path in dict.fromkeys(covers):
        if os.path.isdir(path):
            out += ["--tmpfs", _real(path)]
    if shared_net:  # names still resolve: /etc/resolv.conf often points into /run
        out += ["--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve"]
    for path in dict.fromkeys(read):
        out += ["--ro-bind-try", _real(path), _real(path)]
    for path in dict.fromkeys(write):
        out += ["--bind-try", _real(path), _real(path)]
    hidden = [_real(p) for p in dict.fromkeys(hide) if p != "/run" and os.path.isdir(p)]
    for path in hidden:
        out += ["--tmpfs", path]
    for path in own:  # its own data dir, its checkout under the checkouts dir
        if any(_real(path).startswith(h.rstrip("/") + "/") for h in hidden):
            out += ["--bind-try", _real(path), _real(path)]
    for path in keep:
        out += ["--ro-bind-try", _real(path), _real(path)]
    if socket is not None:
        out += ["--ro-bind-try", socket[0], socket[1]]
        out += ["--setenv", "ORCR_SOCKET", os.path.join(socket[1], "orcr.sock")]
    for path in dict.fromkeys(deny):
        if os.path.isdir(path):
            out += ["--tmpfs", _real(path)]
        elif os.path.lexists(path):
            out += ["--ro-bind", "/dev/null", _real(path)]
    out += ["--chdir", cwd, "--", *command]
    return out
