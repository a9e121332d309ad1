"""Power loss: what admission promised is on disk before the client hears of it.

A power cut cannot be staged in a test, so these check the mechanism the
guarantee rests on: every store connection commits with ``synchronous = FULL``
(the WAL is synced at COMMIT), and ``launch.json`` — its bytes, its name in the
agent's directory and that directory's name in ``agents/`` — is fsync'd before
the row's COMMIT runs.
"""

from __future__ import annotations

import os
import threading

import pytest

from orcr_core.agents import queue
from orcr_core.pm.plugins import build_registry, get_plugin_manager
from orcr_core.store import db as store_db
from orcr_core.store import durable
from orcr_core.store.models import db


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def test_every_store_connection_syncs_the_wal_at_commit(store):
    seen = []

    def probe():
        seen.append(db.execute_sql("PRAGMA synchronous").fetchone()[0])
        db.close()

    probe()
    t = threading.Thread(target=probe)  # peewee opens one connection per thread
    t.start()
    t.join()
    assert seen == [2, 2]  # 2 = FULL


def _log_syncs(monkeypatch) -> list[tuple[str, str]]:
    """Every fsync (of which path, once done) and every COMMIT, in order. A lock: a
    group's fsyncs run on a thread pool."""
    log: list[tuple[str, str]] = []
    real_fsync, real_commit = os.fsync, db.commit
    lock = threading.Lock()

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        real_fsync(fd)
        with lock:
            log.append(("fsync", path))

    def commit():
        log.append(("commit", ""))
        real_commit()

    monkeypatch.setattr(durable.os, "fsync", fsync)
    monkeypatch.setattr(db, "commit", commit)
    return log


def test_launch_json_is_on_disk_before_the_row_commits(store, monkeypatch):
    log = _log_syncs(monkeypatch)
    agents = store / "agents"
    agents.mkdir()
    providers = build_registry(get_plugin_manager()).providers
    row = queue.admit(
        queue.RunSpec(provider="echo", cwd="/", prompt="hi", path="p/a"), providers, agents
    )
    data = str(agents / row["uuid"])
    assert log == [
        ("fsync", data + "/launch.json"),
        ("fsync", data),
        ("fsync", str(agents)),
        ("commit", ""),
    ]


def test_make_dir_with_file_writes_everything(tmp_path):
    durable.make_dir_with_file(str(tmp_path / "d"), "f.json", b"x" * 100_000)
    assert (tmp_path / "d" / "f.json").read_bytes() == b"x" * 100_000
    assert oct((tmp_path / "d").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "d" / "f.json").stat().st_mode & 0o777) == "0o600"


def test_a_group_admission_syncs_every_launch_json_before_its_one_commit(store, monkeypatch):
    """Pipelined admissions (``run_many``) are written without fsyncs and synced
    together before the group's single COMMIT (``durable.sync_dirs_with_file``):
    each file, each data dir, then ``agents/`` once, all before the commit."""
    import json
    import socket
    from types import SimpleNamespace

    from orcr_core import config as config_mod
    from orcr_core.server import listener

    log = _log_syncs(monkeypatch)
    woke: list[dict] = []
    agents = store / "agents"
    agents.mkdir()
    server = SimpleNamespace(
        config=config_mod.load(store / "absent.toml"),
        registry=build_registry(get_plugin_manager()),
        agents_dir=agents,
        store_path=store / "store.db",
        store_broken=False,
        notify=lambda **kw: woke.append(kw),
    )
    ours, theirs = socket.socketpair()
    conn = listener.Connection(server, ours)
    conn.negotiated = True
    lines = [
        json.dumps(
            {
                "id": i,
                "method": "agent.run",
                "params": {"provider": "echo", "cwd": "/", "prompt": "hi", "path": f"g/a{i}"},
            },
            separators=(",", ":"),  # the compact frames orcr's client sends
        ).encode()
        for i in range(5)
    ]
    conn.reader.buf += b"\n".join(lines[1:]) + b"\n"
    conn.admit_group(lines[0])
    theirs.settimeout(5)
    data = b""
    while data.count(b"\n") < 5:
        data += theirs.recv(65536)
    replies = [json.loads(x) for x in data.splitlines()]
    uuids = [r["result"]["uuid"] for r in replies]
    assert len(set(uuids)) == 5
    assert log[-1] == ("commit", "") and log.count(("commit", "")) == 1
    synced = log[:-1]
    want = {("fsync", str(agents / u / "launch.json")) for u in uuids}
    want |= {("fsync", str(agents / u)) for u in uuids}
    assert set(synced[:-1]) == want and len(synced) == 11
    assert synced[-1] == ("fsync", str(agents))  # the data dirs' entries, last
    assert woke == [{"queue": True}]  # once for the group, the queue too: a slot is free
    ours.close()
    theirs.close()
