"""ensure_session starts orcr's own herdr server: the emulator as a subprocess via a shim."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import orcr_testing
import pytest
from orcr_herdr.driver import HERDR_CONFIG, HerdrDriver
from orcr_herdr.paths import session_dir, session_socket
from orcr_testing.herdr.shim import write_herdr_shim
from orcr_testing.herdr.wire import LINE_AGENT, call, ok

from orcr_core.contracts import DriverError, StartSpec
from orcr_core.kit.testing import until


@pytest.fixture
def shim_env(short_tmp, monkeypatch):
    """Put a ``herdr`` shim first on PATH; returns a function to rewrite its options."""
    bin_dir = short_tmp / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def write(**env):
        return write_herdr_shim(bin_dir, env={"ORCR_HERDR_EMU_SHELL": "/bin/sh", **env})

    write()
    return write


@pytest.fixture
def drivers():
    """Drivers whose servers are stopped (and killed if need be) at teardown."""
    made: list[HerdrDriver] = []
    yield made
    for driver in made:
        proc = driver._server
        if proc is None:
            continue
        try:
            driver.request("server.stop", {})
        except DriverError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def serving(sock) -> bool:
    """The socket accepts a connection: its file appears at bind(), before listen()."""
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(sock))
        except OSError:
            return False
    return True


def violations(session: str = "orcr") -> list:
    path = session_dir(session) / "emulator-violations.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_available_looks_for_the_binary_on_path(short_tmp, config_factory, monkeypatch):
    monkeypatch.setenv("PATH", str(short_tmp / "empty"))
    available, why = HerdrDriver.available(config_factory())
    assert not available and "herdr" in why and "PATH" in why
    write_herdr_shim(short_tmp / "empty", name="myherdr")
    assert HerdrDriver.available(config_factory(binary="myherdr"))[0]


def test_ensure_session_starts_a_detached_server(
    shim_env, drivers, config_factory, short_tmp, monkeypatch
):
    # inherited from an enclosing herdr pane: must not redirect orcr's own server
    monkeypatch.setenv("HERDR_SOCKET_PATH", str(short_tmp / "users-herdr.sock"))
    monkeypatch.setenv("HERDR_PANE_ID", "w9:p9")
    driver = HerdrDriver(config_factory())
    drivers.append(driver)
    driver.ensure_session()
    assert driver._server is not None and driver._server.poll() is None
    assert os.getsid(driver._server.pid) == driver._server.pid  # its own session
    assert driver.socket_path == str(session_socket("orcr")) and os.path.exists(driver.socket_path)
    assert not (short_tmp / "users-herdr.sock").exists()
    assert driver.handshake()["protocol"] == 20
    config_file = short_tmp / "orcr" / "herdr-config.toml"
    assert config_file.read_text() == HERDR_CONFIG
    driver.ensure_session()  # already running: nothing new is spawned
    ws = driver.ensure_workspace("proj")
    ref = driver.start(StartSpec(ws, "proj/a", "/tmp", tuple(LINE_AGENT), {}))
    until(lambda: "READY" in driver.read(ref))
    env_dump = call(driver.socket_path, "pane.process_info", {"pane_id": ref.pane_id})
    assert env_dump["result"]["process_info"]["shell_pid"] > 0
    # the agent reports a session; resume_agents_on_restore=false reached the server
    ok(driver.socket_path, "pane.report_agent_session",
       {"pane_id": ref.pane_id, "source": "herdr:claude", "agent": "claude",
        "agent_session_id": "s-1"})  # fmt: skip
    assert driver.session_pointer(ref).value == "s-1"
    first = driver._server
    driver.request("server.stop", {})
    assert first.wait(timeout=10) == 0
    assert json.loads((session_dir("orcr") / "session.json").read_text())["workspaces"]
    driver.ensure_session()  # restarts it
    assert driver._server is not first
    assert driver.session_pointer(ref) is None  # no pending resume: a plain shell
    assert driver.read(ref) is not None
    assert [p.label for p in driver.snapshot()] == ["proj/a"]
    assert violations() == []


def test_ensure_session_trusts_a_recent_reply_and_pings_once_it_is_old(
    shim_env, drivers, config_factory, monkeypatch
):
    """Every monitor step and promotion calls ensure_session: a herdr reply within
    ANSWERED_RECENTLY stands for its ping (one connection each, half of what a
    waiting [herdr] test sent). An old reply, a failed request or a ``server.stop``
    makes it ping again (the stop: test_ensure_session_starts_a_detached_server).
    Planted: the recent-reply check dropped -> a ping after the snapshot -> fails;
    answered_at not cleared when a request finds herdr gone -> no restart -> fails."""
    driver = HerdrDriver(config_factory())
    drivers.append(driver)
    driver.ensure_session()
    sent: list[str] = []
    real = driver.client.request

    def spy(method, params=None, attempts=None):
        sent.append(method)
        return real(method, params, attempts)

    monkeypatch.setattr(driver.client, "request", spy)
    driver.snapshot()
    driver.ensure_session()
    assert sent == ["session.snapshot"]  # the snapshot's reply said herdr answers
    driver.client.answered_at -= 1.0
    driver.ensure_session()
    assert sent == ["session.snapshot", "ping"]
    first = driver._server
    first.kill()  # herdr dies: the next request finds it gone, the next step restarts it
    first.wait(10)
    with pytest.raises(DriverError):
        driver.snapshot()
    driver.ensure_session()
    assert driver._server is not first and driver._server.poll() is None


@pytest.mark.parametrize("protocol", [20, 22])
def test_own_server_starts_from_a_clean_environment(
    shim_env, drivers, config_factory, monkeypatch, protocol
):
    """Claude Code's markers and the host terminal's session ids never reach orcr's
    panes, on 0.8 (which passes its environment on) as on 0.9 (which stopped
    passing some of them in 0.9.2): orcr's server is started without them. The
    server is ``herdr --session NAME server`` on both (0.9 has no --no-session)."""
    shim_env(ORCR_HERDR_EMU_PROTOCOL=str(protocol))
    markers = {
        "CLAUDECODE": "1",
        "CLAUDE_CODE_ENTRYPOINT": "cli",
        "CLAUDE_CODE_MESSAGING_TOKEN": "secret",
        "ITERM_SESSION_ID": "w0t0p0",
        "KITTY_WINDOW_ID": "3",
        "TERM_PROGRAM": "iTerm.app",
    }
    for name, value in markers.items():
        monkeypatch.setenv(name, value)
    driver = HerdrDriver(config_factory())
    drivers.append(driver)
    driver.ensure_session()
    assert driver.handshake()["protocol"] == protocol
    assert driver._server.args[1:] == ["--session", "orcr", "server"]
    with open(f"/proc/{driver._server.pid}/environ", "rb") as f:
        server_env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    assert not {k.encode() for k in markers} & set(server_env), server_env.keys()
    shown = "; ".join(f"echo {k}=${{{k}:-none}}" for k in markers)
    argv = ["/bin/sh", "-c", f"{shown}; echo ENV-DONE; sleep 30"]
    ref = driver.start(StartSpec(driver.ensure_workspace("proj"), "proj/a", "/tmp", argv, {}))
    screen = until(lambda: (lambda s: s if "ENV-DONE" in s else None)(driver.read(ref)))
    line = " ".join(screen.split())
    assert all(f"{k}=none" in line for k in markers if k != "TERM_PROGRAM"), line
    # 0.9.2 tells panes they run in herdr; 0.8 passes no TERM_PROGRAM at all now
    assert f"TERM_PROGRAM={'herdr' if protocol == 22 else 'none'}" in line, line
    assert violations() == []


def test_ensure_session_reports_a_server_that_dies(shim_env, drivers, config_factory):
    shim_env(ORCR_HERDR_EMU_PROTOCOL="not-a-number")
    driver = HerdrDriver(config_factory())
    drivers.append(driver)
    with pytest.raises(DriverError) as exc:
        driver.ensure_session()
    assert exc.value.code == "herdr_start_failed" and "exited with status" in str(exc.value)


def test_shim_options_reach_the_server(shim_env, drivers, config_factory):
    shim_env(ORCR_HERDR_EMU_PROTOCOL="19")
    driver = HerdrDriver(config_factory(session="other"))
    drivers.append(driver)
    driver.ensure_session()
    assert driver.socket_path.endswith("/herdr/sessions/other/herdr.sock")
    assert driver.handshake()["protocol"] == 19


def test_explicit_socket_is_never_started(shim_env, config_factory, short_tmp):
    driver = HerdrDriver(config_factory(socket=str(short_tmp / "x.sock")))
    driver.client.backoff = 0.001
    with pytest.raises(DriverError) as exc:
        driver.ensure_session()
    assert exc.value.retryable and "does not start" in str(exc.value)
    assert driver._server is None


#: where orcr_testing is imported from (testing/ in a checkout, not installed)
_TESTING = os.pathsep.join(
    filter(None, [str(Path(orcr_testing.__file__).parents[1]), os.environ.get("PYTHONPATH")])
)


@contextmanager
def _emulator_program(args, env=None):
    """The emulator run as a program (``python -m``), as herdr is; SIGKILLed at the
    end if it is still running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_testing.herdr.emulator", *args],
        env={
            **os.environ,
            "ORCR_HERDR_EMU_SHELL": "/bin/sh",
            "PYTHONPATH": _TESTING,
            **(env or {}),
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()


def test_program_computes_socket_like_herdr_and_persists(short_tmp):
    sock = short_tmp / "xdg" / "herdr" / "sessions" / "demo" / "herdr.sock"
    args = ["--session", "demo", "server"]
    with _emulator_program(args, {"HERDR_SOCKET_PATH": "/nope.sock"}) as proc:
        until(lambda: serving(sock), timeout=10)
        ok(sock, "workspace.create", {"label": "x", "cwd": "/tmp"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    saved = json.loads((sock.parent / "session.json").read_text())
    assert saved["workspaces"][0]["custom_label"] == "x"
    assert not sock.exists()


def test_program_honours_herdr_socket_path_without_session(short_tmp):
    sock = short_tmp / "custom.sock"
    with _emulator_program(["server"], {"HERDR_SOCKET_PATH": str(sock)}) as proc:
        until(lambda: serving(sock), timeout=10)
        assert ok(sock, "server.stop") == {"type": "ok"}
        assert proc.wait(timeout=10) == 0
    assert (short_tmp / "xdg" / "herdr" / "session.json").exists()  # the default data dir
