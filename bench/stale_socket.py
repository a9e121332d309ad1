"""A server SIGKILLed right after it starts: does its socket still accept?

The server forks right after it listens (the loop scheduler's warm spares); a child
between fork and exec holds a copy of the listening socket and of the lock, so for a
moment after the server is dead and reaped a connect can still succeed, with nothing
behind it (issue 33 item 15; docs/internals.md, "Reruns"). Starts a server on a fresh
home N times, SIGKILLs it once its lock file says ``listening``, reaps it and connects.
Load makes the window longer: run it with busy loops beside it
(``for i in $(seq 8); do python3 -c 'while 1: pass' & done``).

Run: python bench/stale_socket.py [N]
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(n: int = 30) -> None:
    from orcr_core.server import lockfile

    hits = 0
    for i in range(n):
        home = Path(tempfile.mkdtemp(prefix="orcr-stale-", dir="/tmp"))
        (home / "config.toml").write_text('[driver]\nname = "test"\n')
        env = dict(
            os.environ,
            ORCR_HOME=str(home),
            ORCR_PLUGIN_MODULES="orcr_test_driver",
            PYTHONPATH=str(ROOT / "testing" / "orcr_testing" / "plugins"),
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "orcr_core.server"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        lock, path = home / "run" / "server.lock", home / "run" / "orcr.sock"
        deadline = time.monotonic() + 60
        while not ((held := lockfile.holder(lock)) and held.listening):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"the server did not start: {home}")
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(str(path))
            what, hits = "connected", hits + 1
        except OSError as exc:
            what = type(exc).__name__
        finally:
            s.close()
        print(i, what, "lock held" if lockfile.holder(lock) else "lock free", flush=True)
        shutil.rmtree(home, ignore_errors=True)
    print(f"{hits} of {n} connects succeeded after the server was SIGKILLed and reaped")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
