"""What an argv really runs: the program behind ``env`` and ``nice`` prefixes.

orcr starts Claude Code and Codex through ``env -u VAR -- claude ...`` (a
multiplexer can only add variables), and a driver may add ``env --`` or
``nice -n 0 --`` of its own. Checking ``argv[0]`` alone would check ``env``,
which is always there, and let a missing ``claude`` through to a pane that dies
at once. :func:`missing_program` looks through those prefixes.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: the launch step that joins an agent's ceilings, then execs the rest of the argv
_JOIN = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ceilings", "join.py"
)


def _skip_env(
    argv: list[str], i: int, path: str | None, cwd: str
) -> tuple[int, str | None, str] | None:
    """Past ``env``'s options and assignments: (index of the program, PATH, cwd)."""
    i += 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-i", "-", "--ignore-environment"):
            path = None  # execvp's default search path
            i += 1
        elif arg in ("-u", "--unset", "-C", "--chdir"):
            if arg in ("-C", "--chdir") and i + 1 < len(argv):
                cwd = os.path.join(cwd, argv[i + 1])
            if arg in ("-u", "--unset") and i + 1 < len(argv) and argv[i + 1] == "PATH":
                path = None
            i += 2
        elif arg.startswith(("--unset=", "--chdir=")) or (
            arg.startswith(("-u", "-C")) and not arg.startswith("--")
        ):
            value = arg.split("=", 1)[1] if arg.startswith("--") else arg[2:]
            if arg.startswith(("--chdir=", "-C")):
                cwd = os.path.join(cwd, value)
            elif value == "PATH":
                path = None
            i += 1
        elif arg.startswith("-"):
            return None  # an option orcr does not know: do not guess
        else:
            break
    while i < len(argv) and _ASSIGNMENT.match(argv[i]):
        name, value = argv[i].split("=", 1)
        if name == "PATH":
            path = value
        i += 1
    return i, path, cwd


def _skip_nice(argv: list[str], i: int):
    i += 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i + 1
        if arg in ("-n", "--adjustment"):
            i += 2
        elif arg.startswith("-"):
            i += 1  # -n5, --adjustment=5, -5
        else:
            break
    return i


def program_of(
    argv: Sequence[str], path: str | None, cwd: str
) -> tuple[str, str | None, str] | None:
    """``(program, PATH it is looked up on, cwd)`` for the program ``argv`` runs,
    looking through ``env`` and ``nice`` prefixes; None when it cannot be told."""
    args = list(argv)
    i = 0
    while i < len(args):
        name = os.path.basename(args[i])
        if name == "env":
            skipped = _skip_env(args, i, path, cwd)
            if skipped is None:
                return None
            i, path, cwd = skipped
        elif name == "nice":
            i = _skip_nice(args, i)
        elif _JOIN in args[i + 1 : i + 4] and "--" in args[i:]:
            i = args.index("--", i) + 1  # orcr's launch step (ceilings/join.py): its argv
        elif name == "systemd-run" and "--" in args[i:]:
            i = args.index("--", i) + 1  # the systemd scope launch step (ceilings/systemd.py)
        else:
            return args[i], path, cwd
    return None  # ``env`` alone prints the environment; nothing to check


def missing_program(argv: Sequence[str], env: dict[str, str], cwd: str) -> str | None:
    """Why ``argv`` cannot start (``"claude: command not found"``), or None.

    ``PATH`` is the one the pane gets: ``env["PATH"]`` when given, else orcr's.
    """
    if not argv:
        return "empty argv"
    path = env.get("PATH", os.environ.get("PATH", os.defpath))
    found = program_of(argv, path, cwd)
    if found is None:
        return None
    program, lookup, cwd = found  # env's -i/-u/PATH= may change the PATH it looks up on
    if "/" in program:
        full = os.path.join(cwd, program)
        if not os.path.isfile(full) or not os.access(full, os.X_OK):
            return f"{program}: no such file or not executable"
        return None
    if shutil.which(program, path=lookup if lookup is not None else os.defpath) is None:
        return f"{program}: command not found"
    return None
