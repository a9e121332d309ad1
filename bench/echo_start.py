"""The echo agent's start (its imports), CPU per process against the same
interpreter's bare start, both measured here: every e2e test's agents are echo
agents (or fake TUIs), so this is paid thousands of times per suite.

    python bench/echo_start.py [N]      (default 40 processes each)
"""

from __future__ import annotations

import resource
import subprocess
import sys


def cpu_ms(argv: list[str], n: int) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        subprocess.run(argv, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used / n * 1000


def main(n: int) -> None:
    bare = cpu_ms([sys.executable, "-c", "pass"], n)
    echo = cpu_ms([sys.executable, "-c", "import orcr_providers.echo_agent"], n)
    print(f"bare python {bare:.1f} ms, echo agent's imports {echo:.1f} ms CPU per start")
    print(f"ratio {echo / bare:.2f}, above the bare start {echo - bare:.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
