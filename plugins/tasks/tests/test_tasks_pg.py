"""What only the PostgreSQL backend has: its URL, its password, the claimer's identity,
the fencing token and the database's clock (the shared rules run on both backends in
the other files of this folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from orcr_tasks.backend import QueueError
from orcr_testing.tasks import age_claim


def cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", "tasks", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=60,
    )


@pytest.fixture
def pq(pg_url):
    from orcr_tasks.pg import PgQueue

    q = PgQueue.init(pg_url)
    yield q
    q.db.close()


def test_init_is_idempotent_and_open_names_what_is_wrong(pg_url):
    r = cli("init", pg_url)
    assert r.returncode == 0 and r.stdout.strip() == pg_url, r.stderr
    assert cli("init", pg_url).returncode == 0
    other = pg_url.replace("queue=q", "queue=other")
    r = cli("ls", other)
    assert r.returncode == 1 and "is not a task queue" in r.stderr and "tasks init" in r.stderr
    r = cli("ls", pg_url.replace("&queue=q", ""))
    assert r.returncode == 1 and "names no queue" in r.stderr
    r = cli("init", pg_url.replace("queue=q", "queue=a/b"))
    assert r.returncode == 1 and "not allowed" in r.stderr
    r = cli("path", pg_url, "x")
    assert r.returncode == 1 and "rows, not files" in r.stderr


def test_the_password_is_never_printed(pg_url, short_tmp):
    secret = "s3cret-Pw"
    url = pg_url.replace("postgresql://orcr@", f"postgresql://orcr:{secret}@")  # trust auth
    outs = [cli("init", url), cli("add", url, "--done-when", "x", "--", "t"), cli("ls", url)]
    outs += [cli("status", url), cli("status", url, "--json"), cli("show", url, "T1")]
    outs.append(cli("ls", url.replace("/t", "/nosuchdb_t", 1)))  # an error from libpq
    for r in outs:
        assert secret not in r.stdout + r.stderr, r
    assert outs[-1].returncode == 1 and "nosuchdb" in outs[-1].stderr
    status = json.loads(outs[4].stdout)
    assert status["queue"].startswith("postgresql://orcr@/") and "queue=q" in status["queue"]
    # a password file others can read is refused; 0600 is used
    pw = short_tmp / "pgpass"
    pw.write_text(f"*:*:*:orcr:{secret}\n")
    pw.chmod(0o644)
    r = cli("ls", pg_url, env={"PGPASSFILE": str(pw)})
    assert r.returncode == 1 and "chmod 600" in r.stderr and secret not in r.stderr
    pw.chmod(0o600)
    assert cli("ls", pg_url, env={"PGPASSFILE": str(pw)}).returncode == 0


def test_a_verifier_never_claims_what_its_own_worker_built(pq):
    pq.add("t", "x", task_id="a")
    me = {"pid": 4242, "host": "h1", "slot": 0}
    assert pq.claim("builder", token="b", info=me) == "a"
    pq.moves.finish_build("a", "b", "r1", "echo")
    assert pq.claim("verifier", token="v", info=me) is None  # same host and worker
    assert pq.claim("verifier", token="v", info=dict(me, pid=4243)) == "a"


def test_every_write_after_the_claim_is_fenced(pq):
    pq.add("t", "x", task_id="a")
    assert pq.claim("builder", token="old") == "a"
    age_claim(pq, "a", 3600)
    assert pq.moves.reap(stale=60) == [("a", "doing", "todo")]
    assert pq.claim("builder", token="new") == "a"
    # the zombie first attempt: its heartbeat, results and finish all miss
    pq.write_heartbeat("a", {"token": "old", "agent": "zombie"})
    assert pq.read_heartbeat("a")["token"] == "new" and "agent" not in pq.read_heartbeat("a")
    with pytest.raises(QueueError, match="no longer claimed"):
        pq.moves.finish_build("a", "old", "r-old", "echo", results="zombie report")
    assert pq.results("a") is None and pq.where("a") == ["doing"]
    pq.moves.finish_build("a", "new", "r-new", "echo", results="second attempt")
    rows = pq._rows("SELECT fence, text FROM orcr_task_results WHERE queue = %s", [pq.queue])
    assert rows == [(2, "second attempt")]  # the claim's fence: the second claim
    assert pq.read("review", "a").meta["revision"] == "r-new"


def test_a_claim_is_reaped_on_a_stale_heartbeat_only(pq):
    pq.add("t", "x", task_id="a")
    pq.claim("builder", token="w")
    pq._run(  # claimed an hour ago, heartbeat fresh
        "UPDATE orcr_tasks SET moved_at = now() - interval '1 hour' WHERE queue = %s", [pq.queue]
    )
    assert pq.moves.reap(stale=60) == []
    age_claim(pq, "a", 120)
    assert pq.moves.reap(stale=60) == [("a", "doing", "todo")]


def test_a_queue_opens_where_peewee_was_imported_without_psycopg(pg_url):
    """A server imports peewee with psycopg kept out (orcr_core/store/lean.py); a
    PostgreSQL queue opened in such a process still connects and commits.

    Planted: ``_database`` without ``arm_psycopg()`` -> fails (psycopg driver not found)."""
    code = (
        "import sys\n"
        "from orcr_core.store.lean import import_peewee\n"
        "import_peewee()\n"
        "assert 'psycopg' not in sys.modules\n"
        "from orcr_tasks.pg import PgQueue\n"
        f"q = PgQueue.init({pg_url!r})\n"
        "with q.db.atomic():\n"
        "    print(q.db.execute_sql('SELECT 41 + 1').fetchone()[0])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr


def test_the_cli_loads_no_database_driver_for_a_file_queue(short_tmp):
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['orcr', 'tasks', 'ls', sys.argv[1]]\n"
        "try:\n    runpy.run_module('orcr_core.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'peewee', 'psycopg'}))\n"
    )
    assert cli("init", str(short_tmp / "fq")).returncode == 0
    r = subprocess.run(
        [sys.executable, "-c", probe, str(short_tmp / "fq")], capture_output=True, text=True
    )
    assert r.stdout.strip().endswith("[]"), r


PARK = """
import sys
from orcr_tasks.opener import open_queue
q = open_queue(sys.argv[1])
if sys.argv[2] == "park":
    q.moves.park("a", "w", "which port?")
else:
    q.moves.reap(3600)
"""


def test_a_parked_task_is_noticed_once_even_when_its_mover_dies_after_the_commit(pq, orcr_home):
    """The notice of a move to inbox/ is in the move's transaction; a mover killed
    after the commit leaves it to the next reap, which writes it under the same id."""
    notices = orcr_home.path / "notices"

    def run(op: str, fault: str | None = None) -> int:
        env = dict(orcr_home.env, **({"ORCR_FAULT": fault} if fault else {}))
        return subprocess.run([sys.executable, "-c", PARK, pq.label, op], env=env).returncode

    pq.add("t", "x", task_id="a")
    assert pq.claim("builder", token="w") == "a"
    assert run("park", "tasks.pg.committed") == -9
    assert pq.where("a") == ["inbox"]  # committed
    assert not notices.exists() or not list(notices.iterdir())  # its notice not written yet
    assert run("reap") == 0
    written = [json.loads(p.read_text()) for p in notices.glob("*.json")]
    assert len(written) == 1 and written[0]["data"]["to"] == "inbox"
    assert written[0]["data"]["queue"] == pq.label and written[0]["data"]["task"] == "a"
    assert run("reap") == 0
    assert len(list(notices.glob("*.json"))) == 1  # once


def test_one_claim_takes_one_task(pq):
    """The claim's inner SELECT runs once (``id = (SELECT …)``): as ``id IN (SELECT …)``
    PostgreSQL ran it again for each row the UPDATE scanned, and one claim took them all."""
    for n in range(5):
        pq.add("t", "x", task_id=f"a{n}")
    assert pq.claim("builder", token="w") == "a0"
    assert pq.ids("doing") == ["a0"] and len(pq.ids("todo")) == 4


def test_two_dependencies_passing_at_once_release_their_dependant(pq, pg_url):
    """The release race, interleaved by hand on two connections: A's and B's passes have
    both changed their rows, neither committed, when each looks for tasks to release.
    Each sees the other still in verifying (read committed), so without the per-queue
    advisory lock both would commit and C would stay in backlog/ for ever. The lock makes
    the second wait for the first's commit and then see both done."""
    import threading

    from orcr_tasks.pg import PgQueue

    from orcr_core.kit.testing import until

    pq.add("a", "x", task_id="A")
    pq.add("b", "x", task_id="B")
    pq.add("c", "x", task_id="C", depends_on=["A", "B"])
    for tid in ("A", "B"):
        assert pq.claim("builder", f"b{tid}") == tid
        pq.moves.finish_build(tid, f"b{tid}", "r", "echo")
    tokens = {pq.claim("verifier", "vA"): "vA"}
    tokens[pq.claim("verifier", "vB")] = "vB"
    assert sorted(tokens) == ["A", "B"]

    moved = {t: threading.Event() for t in tokens}
    checked = {t: threading.Event() for t in tokens}
    pids, errors, results = {}, [], {}

    def waiting_for_a_lock(tid: str) -> bool:
        rows = pq._rows(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            [pids[tid]],
        )
        return bool(rows)

    def verdict(tid: str) -> None:
        other = "B" if tid == "A" else "A"
        q = PgQueue(pg_url)  # a connection of its own
        pids[tid] = q._rows("SELECT pg_backend_pid()")[0][0]
        inner = q.moves._release

        def release():  # called in the pass's transaction, after its row changed
            moved[tid].set()
            assert moved[other].wait(30), f"{other}'s pass never changed its row"
            out = inner()
            checked[tid].set()
            # hold this commit until the other pass has looked too, or waits for our lock
            until(
                lambda: checked[other].is_set() or waiting_for_a_lock(other),
                30,
                what=f"{other} to look or wait",
            )
            return out

        q.moves._release = release
        try:
            results[tid] = q.moves.verdict(tid, tokens[tid], True, "echo", "ok")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            q.db.close()

    threads = [threading.Thread(target=verdict, args=(t,)) for t in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    assert results == {"A": "done", "B": "done"}
    assert pq.where("C") == ["todo"]


def test_init_of_an_unreachable_server_is_one_line_not_a_traceback():
    """``tasks init`` opened its transaction (and so its connection) outside the
    error translation: a PostgreSQL server out of reach printed peewee's traceback.
    Planted: the connect-first ``SELECT 1`` removed -> a traceback, fails."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://nobody@127.0.0.1:{port}/db?queue=q"
    r = cli("init", url)
    assert r.returncode == 1, r
    assert "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # psycopg's hint joined on
    first = r.stderr.strip()
    assert first.startswith(f"Error: the PostgreSQL queue postgresql://nobody@127.0.0.1:{port}/db")
    assert "Connection refused" in r.stderr


def test_a_lander_on_tables_made_before_landing_is_told_to_run_init(pq, pg_url):
    """Tables made before landing/ and landed/ (the old state check) refuse a lander's
    claim with a QueueError naming ``tasks init``, not PostgreSQL's raw check
    violation; ``init`` brings them up to date. Planted: the IntegrityError passed on
    as it is -> fails."""
    from orcr_tasks.pg import PgQueue
    from orcr_tasks.pg.schema import STATES_SQL

    old = STATES_SQL.replace(",'landing','landed'", "")
    pq._run("ALTER TABLE orcr_tasks DROP CONSTRAINT orcr_tasks_state_check")
    pq._run(
        f"ALTER TABLE orcr_tasks ADD CONSTRAINT orcr_tasks_state_check CHECK (state IN ({old}))"
    )
    pq.add("t", "x", task_id="a")
    pq._run("UPDATE orcr_tasks SET state = 'done' WHERE queue = %s AND id = 'a'", [pq.queue])
    with pytest.raises(QueueError) as err:
        pq.claim("lander", "l1")
    assert f"orcr tasks init {pq.label}" in str(err.value)
    assert pq.where("a") == ["done"]  # nothing moved
    PgQueue.init(pg_url).db.close()
    assert pq.claim("lander", "l1") == "a"
