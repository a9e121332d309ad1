"""Admission with and without --worktree: 300 pipelined admissions each (cap 1)."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T = Path(tempfile.mkdtemp(prefix="orcr-wtb-", dir="/tmp"))
os.environ["ORCR_HOME"] = str(T / "h")
(T / "h").mkdir()
repo = T / "repo"
subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
(repo / "a").write_text("a")
subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
subprocess.run(
    ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm1"],
    check=True,
)
(T / "h" / "config.toml").write_text(
    f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{T}/tmux.sock"\n[concurrency]\nmax = 1\n'
)
srv = subprocess.Popen(
    [sys.executable, "-m", "orcr_core.server"],
    stdout=open(T / "out", "w"),
    stderr=subprocess.STDOUT,
)
from orcr_core.sdk import Orcr  # noqa: E402
from orcr_core.sdk.client import Client  # noqa: E402

time.sleep(2)
o = Orcr(Client(T / "h" / "run" / "orcr.sock", autostart=False))
for label, wt in (("plain", False), ("worktree", True), ("plain", False), ("worktree", True)):
    specs = [
        {
            "provider": "echo",
            "path": f"{label}{int(time.time() * 1000) % 100000}/a{i}",
            "cwd": str(repo),
            "worktree": wt,
        }
        for i in range(300)
    ]
    t0 = time.perf_counter()
    res = o.run_many(specs)
    dt = time.perf_counter() - t0
    errs = [r for r in res if "error" in r]
    print(f"{label:9s} 300 admissions in {dt * 1000:.0f} ms ({300 / dt:.0f}/s), errors {len(errs)}")
o.close()
srv.terminate()
srv.wait()
subprocess.run(["tmux", "-S", f"{T}/tmux.sock", "kill-server"], capture_output=True)
