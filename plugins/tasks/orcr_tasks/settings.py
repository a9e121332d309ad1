"""A queue's settings (``orcr tasks settings``): how dependants start and what stays.

Kept in the queue itself, so every worker on every host reads the same ones: a
file queue in ``settings.json`` at its root (written whole, under the queue
lock), a PostgreSQL queue in the ``settings`` column of its ``orcr_task_queues``
row. A setting that was never set has its default (:data:`DEFAULTS`).

* ``dependants``: ``merged`` (a dependant leaves backlog/ as soon as its
  dependencies are done, and its builder's checkout starts from their verified
  revisions merged onto the base) or ``landed`` (it leaves backlog/ only once
  every dependency's verified revision is on the base branch, and its checkout
  starts from that branch). See docs/tasks.md, "Dependants".
* ``base``: the branch (or any revision) builders' checkouts start from and
  ``landed`` checks; unset, the ``HEAD`` of the repository the worker's
  ``--cwd`` is in.
* ``keep_checkouts``: keep a built attempt's checkout (``true``), not only its
  branch (the default removes it once its revision and branch are in the task).
* ``land_check``: the shell command ``tasks land`` runs on the exact tree it is about
  to land, when ``--check`` is not given (docs/tasks.md, "Landing").
"""

from __future__ import annotations

import json
from pathlib import Path

from orcr_tasks.backend import QueueError
from orcr_tasks.files import write_atomic

DEPENDANTS = ("merged", "landed")
DEFAULTS: dict = {"dependants": "merged", "base": None, "keep_checkouts": False, "land_check": None}
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def parse(name: str, value: str):
    """``value`` (as typed) for setting ``name``; QueueError naming what is allowed."""
    if name not in DEFAULTS:
        raise QueueError(f"no queue setting {name!r}; the settings are {', '.join(DEFAULTS)}")
    if name == "dependants":
        if value not in DEPENDANTS:
            raise QueueError(f"dependants {value!r}: give one of {', '.join(DEPENDANTS)}")
        return value
    if name == "keep_checkouts":
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise QueueError(f"keep_checkouts {value!r}: give true or false")
    if name == "land_check":
        return value.strip() or None  # a shell command; '' unsets it
    value = value.strip()
    if value.startswith("-") or any(c.isspace() for c in value):
        raise QueueError(f"base {value!r} is not a branch or revision name ('' unsets it)")
    return value or None


def merged(stored: dict | None) -> dict:
    """The stored settings over the defaults (unknown keys a newer orcr wrote are kept)."""
    return {**DEFAULTS, **(stored or {})}


def read_file(root: Path) -> dict:
    """A file queue's stored settings (``settings.json``; {} when there is none)."""
    path = root / "settings.json"
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise QueueError(f"{path} is not a JSON object ({exc}); fix it or remove it") from None
    if not isinstance(stored, dict):
        raise QueueError(f"{path} is not a JSON object; fix it or remove it")
    return stored


def write_file(root: Path, changes: dict) -> dict:
    """Store ``changes`` over a file queue's settings, whole (the caller holds the lock)."""
    stored = {**read_file(root), **changes}
    write_atomic(root / "settings.json", json.dumps(stored, indent=1) + "\n")
    return stored


__all__ = ["read_file", "write_file", "DEFAULTS", "DEPENDANTS", "parse", "merged"]
