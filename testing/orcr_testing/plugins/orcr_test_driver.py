"""A test driver and provider, loaded with ORCR_PLUGIN_MODULES=orcr_test_driver.

The driver keeps its "panes" in a JSON file under ORCR_HOME, so they survive
a server restart like multiplexer panes do; nothing runs in them. The
provider ``testp`` has no transcript: its turns follow the driver's status,
which a test sets by editing the file (``set_status``).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import orcr_core
from orcr_core.contracts import DriverError, PaneInfo, PaneRef, SessionPointer


def _state_path() -> Path:
    return Path(os.environ["ORCR_HOME"]) / "testdriver.json"


@contextmanager
def _state():
    """The state under an exclusive lock, written back atomically (a new file
    renamed over the old): a server SIGKILLed mid-write, as the crash tests do,
    must not leave the "multiplexer" with a truncated file and no panes."""
    path = _state_path()
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = path.read_text() if path.exists() else ""
        state = json.loads(text) if text else {"n": 0, "panes": {}, "workspaces": {}, "log": []}
        yield state
        new = json.dumps(state)
        if new != text:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(new)
            os.replace(tmp, path)


def read_state() -> dict:
    with _state() as s:
        return json.loads(json.dumps(s))


def set_status(pane_id: str, status: str) -> None:
    with _state() as s:
        s["panes"][pane_id]["status"] = status


def add_pane(
    pane_id: str,
    label: str | None,
    instance: str | None = None,
    token: str | None = None,
    ws: str = "w",
    tab: str = "w:t0",
) -> None:
    """A pane the "multiplexer" shows that orcr did not start (a user's, another
    instance's, a late one): idle, running nothing, with these marks."""
    with _state() as s:
        s["panes"][pane_id] = {
            "label": label,
            "ws": ws,
            "tab": tab,
            "argv": [],
            "env": {},
            "cwd": "/",
            "status": "idle",
            "prompts": [],
            "instance": instance,
            "token": token,
        }


def remove_pane(pane_id: str) -> None:
    with _state() as s:
        s["panes"].pop(pane_id, None)


def set_dead(pane_id: str) -> None:
    """The pane's program exited (a dead pane, as tmux keeps it with remain-on-exit)."""
    with _state() as s:
        s["panes"][pane_id]["dead"] = True


def _down_flag() -> Path:
    return _state_path().with_name("testdriver.down")


def set_down(down: bool) -> None:
    """An outage of the "multiplexer" while the server runs: every snapshot (and
    ensure_session) fails until it is over."""
    if down:
        _down_flag().touch()
    else:
        _down_flag().unlink(missing_ok=True)


def down_when_missing(pane_id: str, after: int = 2) -> None:
    """The outage starts right after the ``after``-th snapshot that no longer
    shows ``pane_id``: the server sees the pane gone, then nothing more. (Two by
    default: the monitor's, not only a reconciliation pass's, must see it.)"""
    with _state() as s:
        s["down_when_missing"] = [pane_id, after]


def set_close_refused(refused: bool) -> None:
    """Every pane close fails (retryably) until it is over: a kill cannot end an
    agent while the rest of the "multiplexer" answers."""
    flag = _state_path().with_name("testdriver.noclose")
    if refused:
        flag.touch()
    else:
        flag.unlink(missing_ok=True)


def refused() -> int:
    """How many snapshots were refused during outages."""
    with _state() as s:
        return s.get("refused", 0)


def _is_down() -> bool:
    return bool(os.environ.get("ORCR_TEST_DRIVER_DOWN")) or _down_flag().exists()


class TestDriver:
    name = "test"

    def __init__(self, config):
        self.config = config

    @staticmethod
    def available():
        return True, "test driver"

    def handshake(self):
        if os.environ.get("ORCR_TEST_DRIVER_DOWN"):
            raise DriverError("test driver down", retryable=True)
        return {"version": "test", "protocol": 0}

    def ensure_session(self):
        if _down_flag().exists():
            raise DriverError("test driver down", retryable=True)

    def ensure_workspace(self, level1):
        time.sleep(float(os.environ.get("ORCR_TEST_WORKSPACE_DELAY", "0")))
        with _state() as s:
            return s["workspaces"].setdefault(level1, f"w{len(s['workspaces']) + 1}")

    def start(self, spec):
        delay = float(os.environ.get("ORCR_TEST_START_DELAY", "0"))
        only = os.environ.get("ORCR_TEST_SLOW_LABEL")
        if delay and (not only or only == spec.label):
            time.sleep(delay)
        if os.environ.get("ORCR_TEST_START_ERROR"):
            raise DriverError(os.environ["ORCR_TEST_START_ERROR"], code="start_failed")
        with _state() as s:
            s["n"] += 1
            pid = f"{spec.workspace_id}:p{s['n']}"
            s["panes"][pid] = {
                "label": spec.label,
                "ws": spec.workspace_id,
                "tab": f"{spec.workspace_id}:t{s['n']}",
                "argv": list(spec.argv),
                "env": spec.env,
                "cwd": spec.cwd,
                "status": "idle",
                "prompts": [],
                "instance": spec.instance or None,
                "token": spec.launch_token or None,
            }
            s["log"].append(["start", spec.label, pid])
            return PaneRef(spec.workspace_id, f"{spec.workspace_id}:t{s['n']}", pid)

    def _pane(self, s, pane):
        p = s["panes"].get(pane.pane_id)
        if p is None:
            raise DriverError(f"pane {pane.pane_id} not found", code="pane_not_found")
        return p

    def session_pointer(self, pane):
        return None

    def send_prompt(self, pane, text):
        time.sleep(float(os.environ.get("ORCR_TEST_PROMPT_DELAY", "0")))  # a slow multiplexer
        if "<driver-refuses>" in text:  # a multiplexer that fails to type this prompt
            raise DriverError("the test driver refused to type it")
        if "<driver-crashes>" in text:  # a bug in a driver: not even a DriverError
            raise ValueError("the test driver broke while typing it")
        with _state() as s:
            p = self._pane(s, pane)
            p["prompts"].append(text)
            p["status"] = "working"

    def send_keys(self, pane, keys):
        with _state() as s:
            self._pane(s, pane).setdefault("keys", []).append(keys)

    def read(self, pane):
        with _state() as s:
            return "test pane ready\n" + "\n".join(self._pane(s, pane)["prompts"])

    def close(self, pane):
        if _state_path().with_name("testdriver.noclose").exists():
            raise DriverError("close refused (test driver)", retryable=True)
        time.sleep(float(os.environ.get("ORCR_TEST_CLOSE_DELAY", "0")))  # a slow close
        with _state() as s:
            p = s["panes"].get(pane.pane_id)
            if p is not None and pane.launch_token is not None:
                if (p.get("instance"), p.get("token")) != (pane.instance, pane.launch_token):
                    return  # not this row's pane (Driver.close's contract)
            if s["panes"].pop(pane.pane_id, None) is not None:
                s["log"].append(["close", pane.pane_id])

    def snapshot(self):
        if _is_down():
            with _state() as s:
                s["refused"] = s.get("refused", 0) + 1
            raise DriverError("test driver down", retryable=True)
        with _state() as s:
            trip = s.get("down_when_missing")
            if trip and trip[0] not in s["panes"]:
                trip[1] -= 1
                if trip[1] <= 0:
                    del s["down_when_missing"]
                    set_down(True)
            return [
                PaneInfo(
                    pid,
                    p["ws"],
                    p["tab"],
                    label=p["label"],
                    agent_status=p["status"],
                    instance=p.get("instance"),
                    launch_token=p.get("token"),
                    dead=p.get("dead", False),
                )
                for pid, p in s["panes"].items()
            ]

    def agent_status(self, pane):
        with _state() as s:
            p = s["panes"].get(pane.pane_id)
            return p["status"] if p else None


class TestProvider:
    name = "testp"

    def __init__(self, name: str = "testp"):
        self.name = name

    supported_versions = ""
    has_transcript = False

    def launch_argv(self, spec):
        return list(spec.options.get("argv") or ["testp-agent", spec.path])

    def launch_session(self, spec):
        return None

    def locate_transcript(self, pointer, spec):
        return None

    def open_reader(self, path):
        raise NotImplementedError

    def check_version(self, version, options):
        return None


class ResumableProvider(TestProvider):
    """``testr``: a ``testp`` that records a session at launch and can resume it
    (``orcr agent resume``, ``[recovery] resume_lost``)."""

    def __init__(self):
        super().__init__("testr")

    def launch_session(self, spec):
        return SessionPointer("orcr", "id", f"session-{spec.uuid}")

    def resume_argv(self, spec, pointer):
        return ["testp-agent", spec.path, "--resume", pointer.value]


@orcr_core.hookimpl
def register_drivers(register):
    register(TestDriver)


@orcr_core.hookimpl
def register_providers(register):
    register(TestProvider())
    register(TestProvider("testq"))
    register(ResumableProvider())
