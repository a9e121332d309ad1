"""Both backends for the conformance suite (River's way: one suite, every backend).

``q`` is a fresh queue on each backend in turn: a directory, and a PostgreSQL
queue in a database of its own on a throwaway cluster (one per test session,
so one per pytest-xdist worker; orcr_tasks.testing.PgCluster). Where PostgreSQL
cannot be found the PostgreSQL half is skipped with a one-line reason, unless
``ORCR_TASKS_PG=required`` (set by .ci/run), which makes that an error.
"""

from __future__ import annotations

import os

import pytest
from orcr_tasks.queue import Queue
from orcr_tasks.testing import NOT_FOUND, PgCluster, find_bin

BACKENDS = ["file", "postgresql"]


@pytest.fixture(scope="session")
def pg_cluster():
    if not (find_bin("initdb") and find_bin("pg_ctl")):
        if os.environ.get("ORCR_TASKS_PG") == "required":
            pytest.fail(f"ORCR_TASKS_PG=required: {NOT_FOUND}")
        pytest.skip(NOT_FOUND)
    cluster = PgCluster().start()
    yield cluster
    cluster.stop()


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
