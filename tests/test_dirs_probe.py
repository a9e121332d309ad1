"""orcr probes a directory it must write to by creating a file there. The probe's name
was the process id alone, so two threads of one client probing at once (a task
worker's slots, all autostarting the server after a restart) collided on it and one
was told "orcr cannot write to <home> (File exists)" (a rerun of the tasks outage test)."""

from __future__ import annotations

import threading

from orcr_core import dirs
from orcr_core.kit.testing import in_threads


def test_threads_probing_one_directory_at_once_all_find_it_writable(tmp_path):
    start = threading.Barrier(8)
    problems: list[str] = []

    def probe() -> None:
        start.wait()
        for _ in range(300):
            why = dirs.writable_problem(tmp_path)
            if why:
                problems.append(why)

    in_threads(probe, 8)
    assert problems == []
    assert list(tmp_path.iterdir()) == []  # every probe file is gone again
