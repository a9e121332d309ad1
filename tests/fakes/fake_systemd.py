#!/usr/bin/env python3
"""A fake ``systemd-run`` and ``systemctl`` (run under either name) for the
systemd ceilings backend: there is no systemd on this project's machines.

It records every argv (``$FAKE_SYSTEMD_STATE/argv.jsonl``), keeps the units in
``$FAKE_SYSTEMD_STATE/units.json``, and answers as the real tools document
(systemd-run(1), systemctl(1), systemd.resource-control(5), systemd 252):

* ``systemd-run``: options up to the first non-option or ``--`` (``-u``/``--unit``,
  ``--slice``, ``-p``/``--property``, ``--scope``, ``--user``, ``-q``/``--quiet``,
  ``-G``/``--collect``, ``--description``). Without ``--user`` it talks to the
  system bus, which is absent. Each property is checked as the manager does:
  ``MemoryMax``/``MemoryHigh`` a size (K/M/G/T, base 1024), a percentage or
  ``infinity``; ``TasksMax`` a count, a percentage or ``infinity``;
  ``CPUWeight`` 1..10000 or ``idle``; anything else is ``Unknown assignment``.
  A unit name gets ``.scope`` and a slice ``.slice`` when it has no suffix. A
  scope whose name is loaded already is refused. ``--scope`` runs the command
  in systemd-run's own process (synchronous, the caller's environment), after
  "Running scope as unit: NAME" on stderr unless ``--quiet``.
* ``systemctl --user``: ``show [UNIT...] -p/--property`` (a block per unit, blank-line apart), ``set-property
  [--runtime] UNIT K=V...`` (a slice is loaded on demand; another unit must
  exist), ``stop``, ``kill --signal=``, ``reset-failed``, ``list-units
  --type=scope --all --plain --no-legend PATTERN``.

One manager answers every call in turn: each call holds a lock on the state
(``$FAKE_SYSTEMD_STATE/lock``) from its read to its write (``systemd-run`` until
just before it execs the command), so calls racing from the server and from a
pane's launch step never lose a unit.

A scope is active while its process lives; it then goes ``inactive`` and is
unloaded (``--collect``: always; else only when it did not fail). Tests play
the kernel with ``$FAKE_SYSTEMD_STATE/units.json``: ``"result": "oom-kill"``.
"""

import fcntl
import fnmatch
import json
import os
import re
import signal
import sys

STATE = os.environ.get("FAKE_SYSTEMD_STATE", "/nonexistent")
UNITS = os.path.join(STATE, "units.json")
SIZE = re.compile(r"(\d+)([KMGT]?)")
_MULT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
CGROUP = os.environ.get("FAKE_SYSTEMD_CGROUP", "/user.slice/user-0.slice/user@0.service")


def load() -> dict:
    try:
        with open(UNITS) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def save(units: dict) -> None:
    tmp = UNITS + ".tmp"
    with open(tmp, "w") as f:
        json.dump(units, f)
    os.replace(tmp, UNITS)


def alive(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError, TypeError):
        return False


def settle(units: dict) -> dict:
    """Scopes whose process ended: inactive, and unloaded unless failed (kept)."""
    for name, u in list(units.items()):
        if name.endswith(".scope") and u.get("active") and not alive(u.get("pid")):
            u["active"] = False
            if u.get("result", "success") != "success":
                u["failed"] = True
            if u.get("collect") or not u.get("failed"):
                del units[name]
    return units


def fail(msg: str, code: int = 1):
    sys.stderr.write(msg + "\n")
    sys.exit(code)


def check_property(assignment: str) -> tuple[str, str]:
    key, eq, value = assignment.partition("=")
    if not eq:
        fail(f"Not an assignment: {assignment}")
    if key in ("MemoryMax", "MemoryHigh"):
        ok = value == "infinity" or SIZE.fullmatch(value) or re.fullmatch(r"\d+(\.\d+)?%", value)
        if not ok:
            fail(f"Failed to parse {key} value {value}: Invalid argument")
        if m := SIZE.fullmatch(value):
            value = str(int(m.group(1)) * _MULT[m.group(2)])
    elif key == "TasksMax":
        if not (value == "infinity" or value.isdigit() or re.fullmatch(r"\d+%", value)):
            fail(f"Failed to parse {key} value {value}: Invalid argument")
    elif key == "CPUWeight":
        if value != "idle" and not (value.isdigit() and 1 <= int(value) <= 10000):
            fail(f"Failed to parse {key} value {value}: Numerical result out of range")
    elif key not in ("CollectMode", "OOMPolicy", "Description"):
        fail(f"Unknown assignment: {assignment}")
    return key, value


def mangle(name: str, suffix: str) -> str:
    return name if re.search(r"\.(scope|slice|service)$", name) else name + suffix


def systemd_run(args: list[str]) -> None:
    opts = {"user": False, "scope": False, "quiet": False, "collect": False}
    unit = slice_ = None
    props: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-"):
            break
        if a in ("--user", "--scope", "--quiet", "-q", "--collect", "-G"):
            opts[{"-q": "quiet", "-G": "collect"}.get(a, a[2:])] = True
        elif a.startswith("--unit=") or a == "-u":
            unit = a[7:] if a.startswith("--unit=") else args[(i := i + 1)]
        elif a.startswith("--slice="):
            slice_ = a[8:]
        elif a.startswith("--description="):
            pass
        elif a in ("-p", "--property") or a.startswith(("--property=", "-p")):
            value = (
                args[(i := i + 1)]
                if a in ("-p", "--property")
                else a.split("=", 1)[1]
                if a.startswith("--property=")
                else a[2:]
            )
            key, val = check_property(value)
            props[key] = val
        else:
            fail(f"systemd-run: unrecognized option '{a}'")
        i += 1
    command = args[i:]
    if not opts["user"]:
        fail("Failed to connect to bus: No such file or directory")
    if not command:
        fail("Command line to execute required.")
    if not opts["scope"]:
        fail("fake systemd-run: only --scope is faked")
    units = settle(load())
    name = mangle(unit or f"run-r{os.getpid()}", ".scope")
    if name in units:
        fail(
            f"Failed to start transient scope unit: Unit {name} was already loaded or has a fragment file."
        )
    sl = mangle(slice_, ".slice") if slice_ else "app.slice"
    units.setdefault(sl, {"props": {}, "slice": True})
    units[name] = {"pid": os.getpid(), "slice": sl, "props": props, "active": True,
                   "collect": opts["collect"], "result": "success"}  # fmt: skip
    save(units)
    if not opts["quiet"]:
        sys.stderr.write(f"Running scope as unit: {name}\n")
    os.close(LOCK[0])  # the manager is done: the command runs unlocked
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        fail(f"Failed to execute {command[0]}: {exc.strerror}")


def show(units: dict, unit: str | None, props: list[str]) -> None:
    if unit is None:  # the manager itself
        values = {"ControlGroup": CGROUP, "Version": "252"}
    else:
        u = units.get(unit)
        if u is None:
            values = {"LoadState": "not-found", "ActiveState": "inactive", "Result": "success"}
        else:
            p = u["props"]
            active = bool(u.get("slice") is True or u.get("active"))
            values = {
                "LoadState": "loaded",
                "ActiveState": "active"
                if active
                else ("failed" if u.get("failed") else "inactive"),
                "Result": u.get("result", "success"),
                "MemoryCurrent": str(u.get("memory_current", 0)) if active else "[not set]",
                "MemoryMax": p.get("MemoryMax", "infinity"),
                "MemoryHigh": p.get("MemoryHigh", "infinity"),
                "TasksMax": p.get("TasksMax", "infinity"),
                "TasksCurrent": str(u.get("tasks_current", 1)) if active else "[not set]",
                "CPUWeight": p.get("CPUWeight", "[not set]"),
            }
    for key in props or sorted(values):
        if key in values:
            print(f"{key}={values[key]}")


def systemctl(args: list[str]) -> None:
    if "--user" not in args:
        fail("System has not been booted with systemd as init system (PID 1). Can't operate.")
    args = [a for a in args if a != "--user"]
    verb, rest = args[0], args[1:]
    units = settle(load())
    if verb == "show":
        props = []
        names = []
        i = 0
        while i < len(rest):
            a = rest[i]
            if a in ("-p", "--property"):
                props += rest[(i := i + 1)].split(",")
            elif a.startswith("--property="):
                props += a.split("=", 1)[1].split(",")
            else:
                names.append(a)
            i += 1
        for n, name in enumerate(names or [None]):  # one block per unit, blank-line apart
            if n:
                print()
            show(units, name, props)
    elif verb == "set-property":
        rest = [a for a in rest if a != "--runtime"]
        unit, assignments = rest[0], rest[1:]
        if unit not in units and unit.endswith(".slice"):
            units[unit] = {"props": {}, "slice": True}
        if unit not in units:
            fail(f"Failed to set unit properties on {unit}: Unit {unit} not found.")
        for a in assignments:
            key, value = check_property(a)
            units[unit]["props"][key] = value
    elif verb in ("stop", "kill"):
        sig = signal.SIGTERM
        for a in rest:
            if a.startswith("--signal="):
                sig = getattr(signal, a.split("=", 1)[1])
        for unit in (a for a in rest if not a.startswith("-")):
            u = units.get(unit)
            if u is None:
                if verb == "kill":
                    fail(f"Failed to kill unit {unit}: Unit {unit} not loaded.")
                continue
            if u.get("active") and alive(u.get("pid")):
                os.kill(u["pid"], sig if verb == "kill" else signal.SIGTERM)
    elif verb == "reset-failed":
        for unit in rest:
            if units.get(unit, {}).get("failed"):
                del units[unit]
    elif verb == "list-units":
        patterns = [a for a in rest if not a.startswith("-")]
        kind = next((a.split("=", 1)[1] for a in rest if a.startswith("--type=")), None)
        for name, u in sorted(units.items()):
            if kind and not name.endswith("." + kind):
                continue
            if patterns and not any(fnmatch.fnmatch(name, p) for p in patterns):
                continue
            state = "active" if u.get("active") else ("failed" if u.get("failed") else "inactive")
            print(f"{name} loaded {state} {'running' if u.get('active') else 'dead'} fake")
    else:
        fail(f"Unknown command verb {verb}.")
    save(units)


#: the state's lock, held by this call (closed before systemd-run execs)
LOCK: list[int] = []


def main() -> None:
    os.makedirs(STATE, exist_ok=True)
    LOCK.append(os.open(os.path.join(STATE, "lock"), os.O_CREAT | os.O_RDWR, 0o600))
    fcntl.flock(LOCK[0], fcntl.LOCK_EX)
    with open(os.path.join(STATE, "argv.jsonl"), "a") as f:
        f.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\n")
    if os.path.basename(sys.argv[0]) == "systemd-run":
        systemd_run(sys.argv[1:])
    else:
        systemctl(sys.argv[1:])


if __name__ == "__main__":
    main()
