"""The PostgreSQL backend of ``orcr tasks`` (issue 26; docs/tasks.md, "PostgreSQL").

Imported only for a queue named by a ``postgresql://`` URL, so its driver
(``psycopg``, the ``orcr[postgresql]`` extra) never loads otherwise."""

from orcr_tasks.pg.queue import PgQueue

__all__ = ["PgQueue"]
