"""The transcript watcher on real inotify: growth, creation, a vanished directory, the limit."""

from __future__ import annotations

import shutil
import threading

import pytest

from orcr_core.agents import fswatch
from orcr_core.kit.testing import until

pytestmark = pytest.mark.skipif(fswatch.INotify is None, reason="inotify is Linux-only")


class Seen:
    def __init__(self):
        self.lock = threading.Lock()
        self.items: list[str | None] = []

    def __call__(self, uuid):
        with self.lock:
            self.items.append(uuid)

    def has(self, uuid) -> bool:
        with self.lock:
            return uuid in self.items


@pytest.fixture
def watcher(monkeypatch):
    monkeypatch.delenv("ORCR_WATCH_LIMIT", raising=False)
    seen = Seen()
    w = fswatch.TranscriptWatcher(seen)
    w.start()
    yield w, seen
    w.stop()


def test_growth_and_creation_wake_the_agent_that_owns_the_file(watcher, tmp_path):
    w, seen = watcher
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "t.jsonl").write_text("")
    assert w.watch("A", str(tmp_path / "a" / "t.jsonl"))
    assert w.watch("B", str(tmp_path / "b" / "t.jsonl"))  # not created yet
    assert w.watch("A2", str(tmp_path / "a" / "other.jsonl"))  # same directory, other file
    with (tmp_path / "a" / "t.jsonl").open("a") as f:
        f.write("{}\n")
    until(lambda: seen.has("A"), timeout=5, what="A's growth")
    (tmp_path / "b" / "t.jsonl").write_text("{}\n")
    until(lambda: seen.has("B"), timeout=5, what="B's creation")
    assert not seen.has("A2")
    assert w.count() == 3


def test_a_vanished_directory_drops_the_watch(watcher, tmp_path):
    w, seen = watcher
    (tmp_path / "d").mkdir()
    assert w.watch("D", str(tmp_path / "d" / "t.jsonl"))
    shutil.rmtree(tmp_path / "d")
    until(lambda: not w.watched("D"), timeout=5, what="the watch to go")
    assert seen.has("D")  # told, so the monitor polls it from now on


def test_unwatch_removes_the_last_watch_of_a_directory(watcher, tmp_path):
    w, _ = watcher
    assert w.watch("X", str(tmp_path / "t.jsonl"))
    w.unwatch("X")
    assert (w.watched("X"), w.count()) == (False, 0)
    assert w.watch("X", str(tmp_path / "t.jsonl"))  # and can come back


def test_past_the_limit_a_watch_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("ORCR_WATCH_LIMIT", "1")
    w = fswatch.TranscriptWatcher(lambda uuid: None)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    assert w.watch("A", str(tmp_path / "a" / "t.jsonl"))
    assert w.watch("A2", str(tmp_path / "a" / "u.jsonl"))  # a watched directory costs nothing
    assert not w.watch("B", str(tmp_path / "b" / "t.jsonl"))
    assert "limit" in w.error
    monkeypatch.setenv("ORCR_WATCH_LIMIT", "0")
    off = fswatch.TranscriptWatcher(lambda uuid: None)
    assert not off.available and not off.watch("A", str(tmp_path / "a" / "t.jsonl"))


def test_a_missing_directory_cannot_be_watched(watcher, tmp_path):
    w, _ = watcher
    assert not w.watch("M", str(tmp_path / "nope" / "t.jsonl"))
    assert not w.watched("M")
