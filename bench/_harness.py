"""A private orcr server for benchmarks: temp ORCR_HOME, the in-repo test driver.

The test driver (tests/plugins/orcr_test_driver.py) starts no processes, so the
figures measure orcr itself: the CLI, the socket, admission and promotion.
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
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: where benchmark stores live; ORCR_BENCH_DIR=/dev/shm takes the disk out of the figures
BENCH_DIR = os.environ.get("ORCR_BENCH_DIR", "/tmp")


@contextmanager
def bench_server(config: str = "", where: str = BENCH_DIR):
    home = Path(tempfile.mkdtemp(prefix="orcr-bench-", dir=where))
    (home / "config.toml").write_text('[driver]\nname = "test"\n' + config)
    env = dict(
        os.environ,
        ORCR_HOME=str(home),
        ORCR_PLUGIN_MODULES="orcr_test_driver",
        PYTHONPATH=str(ROOT / "tests" / "plugins"),
    )
    env.pop("ORCR_PATH", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.server"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sock = home / "run" / "orcr.sock"
    deadline = time.monotonic() + 15
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(str(sock))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
        finally:
            s.close()
    try:
        yield home, env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(home, ignore_errors=True)
