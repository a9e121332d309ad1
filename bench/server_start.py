"""CPU of one server start (issue 34: the suite starts a server in most of its
end-to-end tests, often several): the server on the in-repo test driver, from exec
until one second after its socket answers, counting every process it started by then
(``/proc``, every thread, through psutil). Printed against the same interpreter's bare
``python -c pass`` measured in the same run, as a ratio.

    python bench/server_start.py [--n 20] [--against DIR]

``--against DIR`` measures another checkout of orcr (a ``git worktree add`` of an older
commit) the same way, one start of each in turn: the two medians and their ratio.
Figures: docs/internals.md "Running the tests".
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def _pythonpath(root: Path) -> str:
    """The checkout, its bundled plugins and its test driver first on the path."""
    plugins = sorted(
        str(p) for p in (root / "plugins").iterdir() if (p / "pyproject.toml").exists()
    )
    driver = root / "testing" / "orcr_testing" / "plugins"
    return os.pathsep.join([str(root), *plugins, str(driver), str(root / "testing")])


def _tree_cpu(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


def one_start(root: Path) -> float:
    """Seconds of CPU of one server start, on a fresh home."""
    with tempfile.TemporaryDirectory(prefix="orcr-start-", dir="/tmp") as tmp:
        home = Path(tmp) / "h"
        home.mkdir()
        (home / "config.toml").write_text('[driver]\nname = "test"\n')
        env = dict(os.environ, ORCR_HOME=str(home), ORCR_PLUGIN_MODULES="orcr_test_driver")
        env["PYTHONPATH"] = _pythonpath(root)
        for var in ("ORCR_PATH", "ORCR_SOCKET", "TMUX", "HERDR_SOCKET_PATH"):
            env.pop(var, None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "orcr_core.server"],
            env=env,
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            sock = home / "run" / "orcr.sock"
            deadline = time.monotonic() + 30
            while not sock.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start (exit {proc.poll()})")
                time.sleep(0.005)
            time.sleep(1.0)  # what it starts right after listening counts too
            return _tree_cpu(psutil.Process(proc.pid))
        finally:
            for p in psutil.Process(proc.pid).children(recursive=True):
                p.kill()
            proc.kill()
            proc.wait()


def bare_python() -> float:
    before = os.times()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--against", metavar="DIR", help="another checkout to compare with")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}; N = {a.n}")
    sides = {"this": ROOT}
    if a.against:
        sides = {"against": Path(a.against).resolve(), "this": ROOT}
    for root in sides.values():  # bytecode for both (this machine sets PYTHONDONTWRITEBYTECODE)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                *(str(root / d) for d in ("orcr_core", "plugins", "testing")),
            ],
            check=True,
        )
    got: dict[str, list[float]] = {name: [] for name in sides}
    bare = []
    for _ in range(a.n):
        bare.append(bare_python())
        for name, root in sides.items():
            got[name].append(one_start(root))
    base = statistics.median(bare)
    print(f"python -c pass        median {base * 1000:6.1f} ms CPU")
    for name, runs in got.items():
        med = statistics.median(runs)
        print(
            f"server start ({name:7}) median {med * 1000:6.1f} ms CPU  ({med / base:.1f}x python)"
        )
    if a.against:
        ratio = statistics.median(got["this"]) / statistics.median(got["against"])
        print(f"this / against {ratio:.2f}")


if __name__ == "__main__":
    main()
