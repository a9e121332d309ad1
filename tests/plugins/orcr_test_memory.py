"""Memory readings a test sets, loaded into the server with
ORCR_PLUGIN_MODULES=orcr_test_driver,orcr_test_memory.

``$ORCR_HOME/testmemory.json`` holds ``{"available", "total", "settle",
"footprints": {path: bytes}}``: the server's available memory, how long a
promoted agent counts as loading (``memory.LOAD_SETTLE``), and each agent's
measured footprint (an agent not listed has no process measured yet). Read on
every call, so a test changes the machine under a running server (by writing
the file atomically: tests/test_memory.py). Importing this module patches
``orcr_core.agents.memory``: only the server process loads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from orcr_core.agents import memory


def _path() -> Path:
    return Path(os.environ["ORCR_HOME"]) / "testmemory.json"


def _read() -> dict:
    try:
        return json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}


def available() -> tuple[int, int]:
    data = _read()
    memory.LOAD_SETTLE = float(data.get("settle", memory.LOAD_SETTLE))
    return int(data.get("available", 64 * 2**30)), int(data.get("total", 64 * 2**30))


def measure(server, agents: list) -> dict:
    sizes = _read().get("footprints", {})
    return {a.uuid: sizes.get(a.path) for a in agents}


memory.available = available
memory.measure = measure
