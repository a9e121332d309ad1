"""Both backends for the conformance suite (River's way: one suite, every backend).

``q`` is a fresh queue on each backend in turn: a directory, and a PostgreSQL
queue in a database of its own on a throwaway cluster (one per test session,
so one per pytest-xdist worker; orcr_testing.tasks.PgCluster), started once the
tests are collected rather than in the first test's setup. Where PostgreSQL
cannot be found the PostgreSQL half is skipped with a one-line reason, unless
``ORCR_TASKS_PG=required`` (set by .ci/run), which makes that an error.
"""

from __future__ import annotations

import os

import pytest
from orcr_tasks.queue import Queue
from orcr_testing.tasks import NOT_FOUND, PgCluster, find_bin

BACKENDS = ["file", "postgresql"]


_started: dict = {}  # the cluster started once collection is done (or why it did not start)


def pytest_collection_finish(session):
    """Start this process's cluster once the tests are collected, when any collected test
    needs it: initdb and the start (~1.5 s of CPU, a minute and more at load 50) then
    count against no test's timeout, as they would in the first test's setup."""
    if not any("pg_cluster" in getattr(i, "fixturenames", ()) for i in session.items):
        return
    if find_bin("initdb") and find_bin("pg_ctl"):
        try:
            _started["cluster"] = PgCluster().start()
        except Exception as exc:  # reported by the fixture, to the tests that need it
            _started["error"] = exc


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The PostgreSQL half is ``e2e`` (tests/_support/e2e.py): it asks for its cluster
    at run time (``make_queue``), so no fixture name gives it away."""
    here = os.path.dirname(__file__)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("backend") == "postgresql" and str(item.path).startswith(here):
            item.add_marker(pytest.mark.e2e)


def pytest_sessionfinish(session):
    if "cluster" in _started:
        _started.pop("cluster").stop()


@pytest.fixture(scope="session")
def pg_cluster():
    if not (find_bin("initdb") and find_bin("pg_ctl")):
        if os.environ.get("ORCR_TASKS_PG") == "required":
            pytest.fail(f"ORCR_TASKS_PG=required: {NOT_FOUND}")
        pytest.skip(NOT_FOUND)
    if "error" in _started:
        raise _started["error"]
    if "cluster" not in _started:  # collected without the hook (a plugin reordered items)
        _started["cluster"] = PgCluster().start()
    return _started["cluster"]


@pytest.fixture
def pg_url(pg_cluster):
    """A queue URL in a fresh, empty database (dropped after the test)."""
    db = pg_cluster.new_database()
    yield pg_cluster.url(db)
    pg_cluster.drop_database(db)


def make_queue(request, backend: str, short_tmp):
    if backend == "file":
        return Queue.init(short_tmp / "queue")
    from orcr_tasks.pg import PgQueue

    q = PgQueue.init(request.getfixturevalue("pg_url"))
    request.addfinalizer(q.db.close)
    return q


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def q(request, backend, short_tmp):
    """A fresh queue on each backend."""
    return make_queue(request, backend, short_tmp)


@pytest.fixture
def fq(short_tmp) -> Queue:
    """A file queue, for the rules only the file backend has (folders, the lock dir)."""
    return Queue.init(short_tmp / "queue")
