"""The emulator as a program: what a ``herdr`` shim on PATH runs.

``python -m orcr_testing.herdr.emulator [--session NAME] server`` listens where
herdr would (``--session`` > ``HERDR_SOCKET_PATH`` > ``HERDR_SESSION`` >
default) and keeps ``session.json`` in the session dir, which follows the
session name only. ``HERDR_CONFIG_PATH`` is read for
``[session] resume_agents_on_restore``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from orcr_herdr.paths import config_dir

from orcr_testing.herdr.dialect import dialect_for
from orcr_testing.herdr.emulator import Emulator


def session_paths(session: str | None) -> tuple[Path, Path]:
    """(socket path, session dir) like herdr: ``--session`` > HERDR_SOCKET_PATH > HERDR_SESSION."""
    cfg = config_dir()
    if session is None:
        env_session = os.environ.get("HERDR_SESSION")
        data = cfg if env_session in (None, "", "default") else cfg / "sessions" / env_session
        socket_env = os.environ.get("HERDR_SOCKET_PATH")
        if socket_env:
            return Path(socket_env), data
        return data / "herdr.sock", data
    data = cfg if session == "default" else cfg / "sessions" / session
    return data / "herdr.sock", data


def _parse_cli(argv: list[str]) -> tuple[str | None, list[str]]:
    session, rest = None, []
    it = iter(argv)
    for arg in it:
        if arg == "--session":
            session = next(it, None)
        elif arg.startswith("--session="):
            session = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return session, rest


def _read_herdr_config() -> dict:
    path = os.environ.get("HERDR_CONFIG_PATH")
    if not path or not os.path.exists(path):
        return {}
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")


def main(argv: list[str] | None = None) -> int:
    """``herdr [--session NAME] server`` / ``herdr --version`` for tests.

    Emulator knobs come from env vars (a shim bakes them in):
    ``ORCR_HERDR_EMU_PROTOCOL``, ``_STRICT`` (default: on when the schema is found),
    ``_SHELL``,
    ``_ENTER_TOO_EARLY``, ``_DROP_ENTER``, ``_SEED``, ``_VIOLATIONS`` (JSONL path,
    default ``<session dir>/emulator-violations.jsonl``), ``_SAVE_DELAY`` (seconds from
    the last change to the ``session.json`` write, default 0: at once; real herdr
    debounces it by 5 s, so a crash loses the last changes, ORCR-NOTES §12).
    """
    argv = sys.argv[1:] if argv is None else argv
    session, rest = _parse_cli(argv)
    protocol = int(os.environ.get("ORCR_HERDR_EMU_PROTOCOL", "20"))
    if rest in (["--version"], ["-V"], ["version"]):
        print(f"herdr {dialect_for(protocol).version}")
        return 0
    if rest != ["server"]:
        print("herdr emulator: only `[--session NAME] server` and `--version`", file=sys.stderr)
        return 2
    sock, data = session_paths(session)
    if session is not None:  # the explicit flag makes the server ignore inherited overrides
        os.environ.pop("HERDR_SOCKET_PATH", None)
    os.environ.pop("HERDR_CLIENT_SOCKET_PATH", None)
    cfg = _read_herdr_config()
    resume = cfg.get("session", {}).get("resume_agents_on_restore", True)
    from orcr_testing.herdr.schema import find_schema

    strict_env = os.environ.get("ORCR_HERDR_EMU_STRICT", "")
    strict = strict_env != "0" and (strict_env == "1" or find_schema(protocol) is not None)
    shell = os.environ.get("ORCR_HERDR_EMU_SHELL")
    emu = Emulator(
        sock,
        data,
        protocol=protocol,
        strict=strict,
        shell=[shell] if shell else None,
        enter_too_early=_env_flag("ORCR_HERDR_EMU_ENTER_TOO_EARLY"),
        drop_enter_probability=float(os.environ.get("ORCR_HERDR_EMU_DROP_ENTER", "0")),
        seed=int(os.environ.get("ORCR_HERDR_EMU_SEED", "0")),
        save_delay=float(os.environ.get("ORCR_HERDR_EMU_SAVE_DELAY", "0")),
        resume_agents=bool(resume),
        session=session or os.environ.get("HERDR_SESSION"),
        herdr_bin=os.path.abspath(sys.argv[0]),
        violations_path=os.environ.get("ORCR_HERDR_EMU_VIOLATIONS")
        or (data / "emulator-violations.jsonl" if strict else None),
    )
    data.mkdir(parents=True, exist_ok=True)

    def on_signal(signum, frame):
        emu.stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        emu.start()
    except RuntimeError as exc:
        print(f"herdr: {exc}", file=sys.stderr)
        return 1
    print(f"herdr server listening on {sock}", file=sys.stderr)
    while not emu.stop_requested.wait(0.5):
        pass
    emu.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
