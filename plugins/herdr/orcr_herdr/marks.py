"""Labels and marks: how orcr finds its own panes again in a herdr session.

Every agent pane carries the agent's full path as its herdr pane label, and
the orcr instance id and the row's launch token ride on the agent's own tab
label (:func:`tab_label`): herdr's socket exposes no pane env and no user data
on a pane, and the tab label is set atomically with the pane by
``layout.apply`` and persisted across restarts.
"""

from __future__ import annotations

import re
from typing import Any

from orcr_core.contracts import SessionPointer

#: The parking workspace's label is ``orcr-parked-<instance id>``: a ``-`` never
#: occurs in a level-1 segment, so no agent workspace can carry it.
PARKING_PREFIX = "orcr-parked-"

#: The marks on an agent's tab label: ``<name> [orcr:<instance>:<launch token>]``.
_MARKS = re.compile(r"\[orcr:([A-Za-z0-9_-]+):([A-Za-z0-9_-]+)\]$")


def tab_label(leaf: str, instance: str, launch_token: str) -> str:
    """The label of an agent's tab: its name, then the pane's marks.

    Each agent has a tab of its own, so the tab's marks are the pane's.
    """
    if not (instance and launch_token):
        return leaf
    return f"{leaf} [orcr:{instance}:{launch_token}]"


def parse_marks(label: str | None) -> tuple[str | None, str | None]:
    m = _MARKS.search(label or "")
    return (m.group(1), m.group(2)) if m else (None, None)


def pointer(raw: Any) -> SessionPointer | None:
    """An ``agent_session`` record as a :class:`SessionPointer` (None when empty)."""
    if not isinstance(raw, dict) or not raw.get("value"):
        return None
    return SessionPointer(
        source=raw.get("source", ""), kind=raw.get("kind", "id"), value=raw["value"]
    )
