"""The hot verbs without click: ``agent run|ls|get|kill|wait|send|read`` in their
common shapes, parsed here by hand, the way git runs its builtins.

Agents call these in loops, and click's import alone costs more than the rest of
the call. :func:`run` takes an argument list it fully understands (known options,
valid values, the right number of arguments) and runs the verb's body from
:mod:`orcr_core.cli.agent_verbs`, the same one the click command runs. Anything
else (``--help``, ``--``, an unknown option, a value click would refuse or that
needs stdin, another noun) returns None, and the click group parses it, so help,
usage errors and their wording stay click's. tests/test_cli_fast.py checks the
two paths print the same.
"""

from __future__ import annotations

import os
import re
import stat
import sys

from orcr_core.cli.codes import CliFailure, echo, error_exit

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(value: str, low: float, high: float | None, low_ok: bool) -> float | None:
    """A duration as orcr's config reads it (a bare number is seconds), within
    bounds; None for anything else (click then words the refusal)."""
    if _NUMBER.fullmatch(value):
        secs = float(value)
    else:
        pos, secs = 0, 0.0
        for m in _DURATION.finditer(value):
            if m.start() != pos:
                break
            secs += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if not value or pos != len(value):
            return None
    if (secs < low if low_ok else secs <= low) or (high is not None and secs > high):
        return None
    return secs


def _turn_timeout(value: str) -> float | None:
    from orcr_core.protocol import MAX_TURN_TIMEOUT

    return _seconds(value, 0, MAX_TURN_TIMEOUT, low_ok=False)


def _wait_timeout(value: str) -> float | None:
    return _seconds(value, 0, None, low_ok=False)


def _gc_after(value: str) -> float | None:
    return _seconds(value, 1, 365 * 86400, low_ok=True)


def _directory(value: str) -> str | None:
    """click.Path(file_okay=False, exists=True): exists, not a file, readable."""
    try:
        st = os.stat(value)
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(st.st_mode) or not os.access(value, os.R_OK):
        return None
    return value


def _until(value: str) -> str | None:
    return value if value in ("idle", "ended") else None


#: per verb: option -> (keyword, kind); kind is "flag" (True), "off" (False), "value",
#: "multi" (repeatable), or a check that returns the value as the verb takes it, None
#: when click should judge it
JSON = {"--json": ("json_", "flag")}
VERBS: dict[str, tuple[dict, int, int]] = {  # verb: (options, least, most positionals)
    "run": (
        {
            "--provider": ("provider", "value"),
            "-p": ("provider", "value"),
            "--path": ("path", "value"),
            "--name": ("name", "value"),
            "--cwd": ("cwd", _directory),
            "--timeout": ("timeout", _turn_timeout),
            "--prompt": ("prompt_opt", "value"),
            "--worktree": ("worktree", "flag"),
            "--branch": ("branch", "value"),
            "--base": ("base", "value"),
            "--model": ("model", "value"),
            "--arg": ("args", "multi"),
            "--rm": ("rm", "flag"),
            "--gc-after": ("gc_after", _gc_after),
            "--sandbox": ("sandbox", "flag"),
            "--no-sandbox": ("sandbox", "off"),
            "--allow-net": ("allow_net", "multi"),
            **JSON,
        },
        0,
        1,
    ),
    "ls": ({"--all": ("all_", "flag"), **JSON}, 0, 1),
    "get": (JSON, 1, 1),
    "kill": ({"--yes": ("yes", "flag"), "-y": ("yes", "flag"), **JSON}, 1, 1),
    "wait": ({"--until": ("until", _until), "--timeout": ("timeout", _wait_timeout), **JSON}, 1, 1),
    "send": ({"--timeout": ("timeout", _turn_timeout)}, 2, 2),
    "read": ({"--last": ("last", "flag"), **JSON}, 1, 1),
}


def parse(argv: list[str]) -> tuple[str, dict, list[str]] | None:
    """``(verb, options, arguments)`` when the fast path can run ``argv``, else None."""
    if len(argv) < 2 or argv[0] != "agent" or argv[1] not in VERBS:
        return None
    spec, least, most = VERBS[argv[1]]
    opts: dict = {}
    args: list[str] = []
    rest = iter(argv[2:])
    for token in rest:
        if token[:1] != "-" or token == "-":
            if token == "-":  # stdin: click's path reads it
                return None
            args.append(token)
            continue
        name, eq, value = token.partition("=") if token[:2] == "--" else (token, "", "")
        if name not in spec:  # --help, --, an unknown or abbreviated option
            return None
        dest, kind = spec[name]
        if kind in ("flag", "off"):  # off: a --no-x of a --x/--no-x pair
            if eq:
                return None
            opts[dest] = kind == "flag"
            continue
        if not eq:
            value = next(rest, None)
            if value is None:
                return None
        if value[:1] == "-":
            return None
        if kind == "multi":
            opts.setdefault(dest, []).append(value)
            continue
        if kind != "value":
            value = kind(value)
            if value is None:
                return None
        opts[dest] = value  # the last one wins, as in click
    if not least <= len(args) <= most:
        return None
    return argv[1], opts, args


def socket_path() -> str | None:
    """The server's socket as :func:`orcr_core.dirs.socket_path` finds it, without
    pathlib; None when only that can tell (no ORCR_HOME: platformdirs decides)."""
    value = os.environ.get("ORCR_SOCKET")
    if not value:
        home = os.environ.get("ORCR_HOME")
        if not home:
            return None
        value = os.path.realpath(os.path.expanduser(home))
        if value != home:  # as dirs does: the server and the panes inherit it absolute
            os.environ["ORCR_HOME"] = value
        value += "/run/orcr.sock"
    if "//" in value or "/./" in value or value.endswith(("/", "/.")) or value[:2] == "./":
        return None  # pathlib would spell it otherwise in messages
    return value


def run(argv: list[str]) -> int | None:
    """Run ``argv`` and return its exit code, or None: click's path runs it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    verb, opts, args = parsed
    if verb == "run" and opts.get("provider") == "command":
        return None  # ARGS is an argv there
    if verb == "kill" and not opts.get("yes"):
        from orcr_core import paths

        if paths.is_glob(args[0]):  # many matches ask on a terminal: click's path
            return None
    prompt = None
    if verb == "run":
        prompt = args[0] if args else opts.pop("prompt_opt", None)
        opts.pop("prompt_opt", None)
        if prompt == "-":
            return None
    try:
        _call(verb, opts, args, prompt, socket_path())
    except CliFailure as exc:
        echo(f"Error: {exc.message}", err=True)
        return exc.code
    except (KeyboardInterrupt, EOFError):  # as click says it
        echo(err=True)
        echo("Aborted!", err=True)
        return 1
    except BrokenPipeError:  # as click's main: exit 1, and no complaint at exit
        from click.utils import PacifyFlushWrapper

        sys.stdout = PacifyFlushWrapper(sys.stdout)
        sys.stderr = PacifyFlushWrapper(sys.stderr)
        return 1
    except Exception as exc:
        code = error_exit(exc)
        if code is None:
            raise
        return code
    return 0


def _call(verb: str, opts: dict, args: list[str], prompt: str | None, sock: str | None) -> None:
    from orcr_core.cli import agent_verbs as verbs

    json_ = opts.pop("json_", False)
    if verb == "run":
        rm = opts.pop("rm", None)  # no --rm: the server applies [agent] rm
        verbs.run(prompt, json_, sock, rm=rm, **opts)
    elif verb == "ls":
        verbs.ls(args[0] if args else None, opts.get("all_", False), json_, sock)
    elif verb == "get":
        verbs.get(args[0], json_, sock)
    elif verb == "kill":
        verbs.kill(args[0], json_, sock=sock)
    elif verb == "wait":
        verbs.wait(args[0], opts.get("until", "idle"), opts.get("timeout"), json_, sock)
    elif verb == "send":
        verbs.send(args[0], args[1], opts.get("timeout"), sock)
    else:
        verbs.read(args[0], opts.get("last", False), json_, sock)
