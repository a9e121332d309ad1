"""peewee without the PostgreSQL driver it imports eagerly.

peewee imports ``psycopg`` at its own import whenever it is installed (the
``postgresql`` extra, for ``orcr tasks``' PostgreSQL queue): about 13 MiB of
resident memory (psycopg, asyncio, ...) in a server whose store is SQLite, a
quarter of an idle server's RSS (issue 39, ``bench/idle.py``). The server imports
peewee through :func:`import_peewee`, with psycopg hidden; code that does open a
PostgreSQL database calls :func:`arm_psycopg` first, which gives peewee the
driver back (``ImportError`` when it is not installed).
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_peewee() -> ModuleType:
    """``import peewee`` without importing psycopg (unless something already has)."""
    if "peewee" in sys.modules:
        return sys.modules["peewee"]
    hide = "psycopg" not in sys.modules
    if hide:
        sys.modules["psycopg"] = None  # type: ignore[assignment]  # import fails: skipped
    try:
        import peewee
    finally:
        if hide and sys.modules.get("psycopg", False) is None:
            del sys.modules["psycopg"]
    return peewee


def arm_psycopg() -> None:
    """Give peewee the psycopg driver :func:`import_peewee` kept from it: the four
    names its import binds (peewee 4), and the adapter's transaction states."""
    import peewee

    if getattr(peewee, "psycopg", None) is not None or not hasattr(peewee, "Psycopg3Adapter"):
        return  # imported with it (or a peewee with no psycopg 3 adapter)
    import psycopg
    from psycopg.pq import TransactionStatus
    from psycopg.types.json import Json, Jsonb

    peewee.TransactionStatus = TransactionStatus
    peewee.Json_pg3, peewee.Jsonb_pg3 = Json, Jsonb
    adapter = peewee.Psycopg3Adapter
    adapter.txn_idle = TransactionStatus.IDLE
    adapter.txn_inerror = TransactionStatus.INERROR
    adapter.txn_unknown = TransactionStatus.UNKNOWN
    peewee.psycopg = psycopg  # last: the adapter is chosen on it
