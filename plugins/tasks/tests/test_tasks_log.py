"""A worker's log: one line per event, whole, however many slots write at once
(issue 33 item 6)."""

from __future__ import annotations

import re
import threading
import time

from orcr_tasks.worker import Worker


class SlowStream:
    """A stream slow over each write, as a pipe to a busy reader is: a thread writing
    yields to the others mid-line wherever a line is not one write."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        time.sleep(0.0002)
        return len(text)

    def flush(self) -> None:
        pass


def test_lines_from_concurrent_slots_never_merge(fq):
    """Eight slot threads say 100 lines each at once: every line arrives whole, once,
    in one write. Planted: ``Worker.say`` as an unlocked ``print(..., flush=True)``
    (the text and its newline two writes) -> fails (lines merge)."""
    stream = SlowStream()
    worker = Worker(fq, "builder", log=stream)
    slots, lines = 8, 100
    gate = threading.Barrier(slots)

    def slot(n: int) -> None:
        gate.wait()
        for i in range(lines):
            worker.say(f"t{n}-{i}: built -> review/")

    threads = [threading.Thread(target=slot, args=(n,)) for n in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    out = "".join(stream.writes).splitlines()
    pattern = re.compile(r"orcr tasks \[builder\] t(\d+)-(\d+): built -> review/")
    bad = [ln for ln in out if not pattern.fullmatch(ln)]
    assert not bad, f"{len(bad)} merged or broken lines, e.g. {bad[:3]}"
    seen = sorted(tuple(map(int, pattern.fullmatch(ln).groups())) for ln in out)
    assert seen == [(n, i) for n in range(slots) for i in range(lines)]
    assert all(w.count("\n") == 1 and w.endswith("\n") for w in stream.writes)
