"""The suite's bytecode (tests/_support/bytecode.py): the processes a test starts read
compiled orcr modules instead of compiling them from source."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_servers_modules_are_compiled_for_the_processes_a_test_starts():
    # a server start imports these; without their bytecode each start compiles them
    for rel in ("orcr_core/server/app.py", "orcr_core/agents/queue.py", "plugins/tmux"):
        path = ROOT / rel
        sources = [path] if path.suffix else sorted(path.rglob("*.py"))
        for src in sources:
            if src.name.startswith("test_"):
                continue
            assert Path(importlib.util.cache_from_source(str(src))).exists(), src
