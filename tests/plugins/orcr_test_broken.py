"""Deliberately broken provider adapters (ORCR_PLUGIN_MODULES=orcr_test_broken).

``brk-<hook>-<how>`` misbehaves in one hook: it raises, returns garbage, or
hangs. Everything else works like ``testp`` with a transcript: the session is
the agent's uuid, its transcript an empty file under ORCR_HOME that reads as
"working" (so the monitor polls it), and ``brk-none-none`` misbehaves nowhere.
``brk-poll-<how>-late`` misbehaves only once the test has armed it (:func:`arm`):
by then its agent is working and only the monitor polls it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orcr_core
from orcr_core.contracts import SessionPointer, TurnState

HOOKS = ("launch_argv", "launch_session", "locate_transcript", "open_reader", "poll")
HOWS = ("raise", "garbage", "hang")

#: what each hook returns when it returns garbage
GARBAGE = {
    "launch_argv": "testp-agent --not-a-list",
    "launch_session": {"session": "not a pointer"},
    "locate_transcript": 42,
    "open_reader": object(),
    "poll": {"state": "idle"},
}


def _armed() -> Path:
    return Path(os.environ["ORCR_HOME"]) / "brk-armed"


def arm() -> None:
    _armed().touch()


class _Reader:
    def __init__(self, provider: BrokenProvider):
        self.provider = provider

    def poll(self) -> TurnState:
        return self.provider.misbehave("poll", TurnState("working"))


class BrokenProvider:
    supported_versions = ""
    has_transcript = True

    def __init__(self, hook: str, how: str, late: bool = False):
        self.hook, self.how, self.late = hook, how, late
        self.name = f"brk-{hook.replace('_', '')}-{how}" + ("-late" if late else "")

    def misbehave(self, hook: str, result):
        if hook != self.hook or (self.late and not _armed().exists()):
            return result
        if self.how == "raise":
            raise RuntimeError(f"{hook} exploded")
        if self.how == "garbage":
            return GARBAGE[hook]
        time.sleep(3600)  # hang: the guard gives up on it
        return result

    def launch_argv(self, spec):
        return self.misbehave("launch_argv", ["testp-agent", spec.path])

    def launch_session(self, spec):
        return self.misbehave("launch_session", SessionPointer("orcr", "id", spec.uuid))

    def locate_transcript(self, pointer, spec):
        path = Path(os.environ["ORCR_HOME"]) / f"brk-{pointer.value}.jsonl"
        path.touch()
        return self.misbehave("locate_transcript", str(path))

    def open_reader(self, path):
        return self.misbehave("open_reader", _Reader(self))

    def check_version(self, version, options):
        return None


PROVIDERS = [BrokenProvider(hook, how) for hook in HOOKS for how in HOWS]
LATE = [BrokenProvider("poll", how, late=True) for how in HOWS]


@orcr_core.hookimpl
def register_providers(register):
    for provider in PROVIDERS + LATE:
        register(provider)
    register(BrokenProvider("none", "none"))
