"""The suite's bytecode (tests/_support/bytecode.py): the processes a test starts read
compiled orcr modules instead of compiling them from source."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fresh(src: Path) -> bool:
    """Whether ``src`` has bytecode a process would use: this interpreter's magic and
    the source's own mtime and size in the header (a stale file is compiled again)."""
    try:
        head = Path(importlib.util.cache_from_source(str(src))).read_bytes()[:16]
    except FileNotFoundError:
        return False
    flags, mtime, size = struct.unpack("<3I", head[4:16])
    st = src.stat()
    return (
        head[:4] == importlib.util.MAGIC_NUMBER
        and flags == 0
        and (mtime, size) == (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
    )


def test_the_servers_modules_are_compiled_for_the_processes_a_test_starts():
    # a server start imports these; without their bytecode each start compiles them
    for rel in ("orcr_core/server/app.py", "orcr_core/agents/queue.py", "plugins/tmux"):
        path = ROOT / rel
        sources = [path] if path.suffix else sorted(path.rglob("*.py"))
        for src in sources:
            if src.name.startswith("test_"):
                continue
            assert _fresh(src), src
