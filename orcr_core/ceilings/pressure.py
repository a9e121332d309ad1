"""Memory pressure (PSI): admission holds promotions while the kernel reports
tasks stalled on memory more than ``concurrency.max_memory_pressure`` percent of
the last ten seconds (``some avg10`` of ``/proc/pressure/memory``).

``ORCR_PRESSURE_FILE`` points the reading at another file (tests). Where the
file is absent (no PSI in this kernel), the check is off and ``doctor`` says so.
"""

from __future__ import annotations

import os

DEFAULT_FILE = "/proc/pressure/memory"


def path() -> str:
    return os.environ.get("ORCR_PRESSURE_FILE") or DEFAULT_FILE


def some_avg10(file: str | None = None) -> float | None:
    """The ``some avg10`` percentage, or None where PSI cannot be read."""
    try:
        with open(file or path()) as f:
            text = f.read()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "some":
            for field in fields[1:]:
                key, _, value = field.partition("=")
                if key == "avg10":
                    try:
                        return float(value)
                    except ValueError:
                        return None
    return None


def held(config) -> str | None:
    """Why promotion holds for memory pressure, or None (below it, off or no PSI)."""
    limit = config.get("concurrency.max_memory_pressure")
    if limit in (None, "off", 0):
        return None
    now = some_avg10()
    if now is None or now <= float(limit):
        return None
    return (
        f"memory pressure {now:.0f}%: some avg10 of {path()} is above "
        f"concurrency.max_memory_pressure {limit}%; queued agents start when it eases"
    )
