"""The soak's loops (bench/soak.py): four cron loops fired each minute and started by
hand every few seconds, and once loops (``--once-at 2s``) that a fault may make miss.

Each cron loop's run admits an echo agent under its run, waits for it, sleeps and
exits with the loop's code: ``--overlap queue`` at ``--max-concurrency`` 1 and 2 (the
second exits 3: failed), one that outlives its ``--timeout``, one ``--overlap skip``.
"""

from __future__ import annotations

import random
import sys

PY = sys.executable
#: the run command of the loops: admit an agent under the run, wait for it, sleep, exit
JOB = """import subprocess, sys, time
cli = [sys.executable, "-m", "orcr_core.cli"]
subprocess.run(cli + ["agent", "run", "--provider", "echo", "--name", "j", "[sleep 1] job"])
subprocess.run(cli + ["agent", "wait", "j", "--timeout", "30s"], capture_output=True)
time.sleep(float(sys.argv[1]))
sys.exit(int(sys.argv[2]))
"""
#: name, cron, flags, job sleep, job exit code
LOOPS = [
    ("lq", ["--overlap", "queue", "--max-concurrency", "1"], 1.0, 0),
    ("lf", ["--overlap", "queue", "--max-concurrency", "2"], 0.5, 3),
    ("lt", ["--overlap", "queue", "--max-concurrency", "1", "--timeout", "3s"], 30.0, 0),
    ("ls", ["--overlap", "skip", "--max-concurrency", "1"], 2.0, 0),
]


def create(inst) -> None:
    job = inst.home / "job.py"
    job.write_text(JOB)
    for name, flags, sleep, code in LOOPS:
        res = inst.cli(
            "loop", "create", name, "* * * * *", *flags, "--", PY, str(job), str(sleep), str(code),
            cwd=str(inst.home),
        )  # fmt: skip
        if res is None or res.returncode != 0:
            raise SystemExit(f"loop create {name} failed: {res and res.stderr}")


def manual_runs(inst, seed: int, stop, admitted, lock) -> None:
    """``loop run start`` on a random loop every 1-5 s; now and then a once loop."""
    rng, n = random.Random(seed * 1000 + 999), 0
    while not stop.wait(rng.uniform(1, 5)):
        if rng.random() < 0.4:
            n += 1
            res = inst.cli(
                "loop", "create", f"once{n}", "--once-at", "2s", "--", PY, "-c", "pass",
                cwd=str(inst.home),
            )  # fmt: skip
            what = "once"
        else:
            what = rng.choice([loop[0] for loop in LOOPS])
            res = inst.cli("loop", "run", "start", what)
        if res is not None and res.returncode == 0:
            with lock:
                admitted[f"run:{what}"] += 1
