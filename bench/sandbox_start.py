"""What the sandbox adds to an agent's start: ``/bin/true`` plain, under bubblewrap alone,
and through orcr's launcher then bubblewrap (the argv a sandboxed agent's pane runs).

    python bench/sandbox_start.py [N]

Prints the mean of N runs (default 20) in milliseconds. docs/sandbox.md gives the figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

from orcr_core.sandbox import policy


class _NoConfig:
    def get(self, key, default=None):
        return default


def mean_ms(argv: list[str], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv, check=True)
    return (time.perf_counter() - start) / n * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        os.mkdir(data)
        pol = policy.admission(True, "bench", work, data, _NoConfig())
        wrapped = policy.wrap(pol, SimpleNamespace(), None, ["/bin/true"], {})
        bare = wrapped[wrapped.index("--") + 1 :]
        for name, argv in (("plain", ["/bin/true"]), ("bwrap", bare), ("orcr", wrapped)):
            print(f"{name:6} {mean_ms(argv, n):7.1f} ms")


if __name__ == "__main__":
    main()
