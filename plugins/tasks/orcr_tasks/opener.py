"""Opening the queue a name picks: a directory (the file backend) or a
``postgresql://`` URL (the PostgreSQL backend).

The PostgreSQL backend is imported only when a URL is given: its driver never
loads for a file queue nor on the CLI's client path.
"""

from __future__ import annotations

from orcr_tasks.backend import is_url


def open_queue(spec):
    """The queue ``spec`` names: a directory or a ``postgresql://`` URL."""
    if is_url(spec):
        from orcr_tasks.pg import PgQueue

        return PgQueue.open(spec)
    from orcr_tasks.queue import Queue

    return Queue.open(spec)


def init_queue(spec):
    """Create the queue ``spec`` names (idempotent)."""
    if is_url(spec):
        from orcr_tasks.pg import PgQueue

        return PgQueue.init(spec)
    from orcr_tasks.queue import Queue

    return Queue.init(spec)
