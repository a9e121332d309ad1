"""The CLI's wall time against the same interpreter's bare start, in one run.

Goal (issue 39): `orcr agent ls` and `orcr agent run`, installed from a wheel
(not editable), <= 2.5x `python -c pass` of that venv's interpreter.

The wheel is built from this checkout and installed into a scratch venv; the
venv reaches orcr's dependencies through a one-line .pth pointing at this
venv's site-packages (a plain path: no editable finder, nothing to download).
The editable install of the development venv is measured too: its import
finder adds to every start, the baseline's as well, so its ratio reads better
than a user's. Calls alternate with the baseline, so load drifts hit both.

Run: python bench/cli_latency.py [N]   (N calls each, default 40)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import ROOT, bench_server  # noqa: E402

GOAL = 2.5


def wheel_venv(where: Path) -> Path:
    """A venv at ``where`` with orcr installed from a freshly built wheel; its python."""
    dist = where / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(ROOT)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (wheel,) = dist.glob("orcr-*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, str(wheel)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    Path(site, "orcr_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return py


def console_script(py: str, where: Path) -> Path:
    """The ``orcr`` script pip writes for ``[project.scripts]``, for interpreter ``py``."""
    script = where / "orcr"
    script.write_text(
        f"#!{py}\nimport re\nimport sys\nfrom orcr_core.cli import main\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def walls(argvs: dict[str, list[str]], env: dict, n: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each argv, the argvs taking turns ``n`` times.
    CPU is the process's user + system time: on a loaded machine the wall time
    also counts waiting for a core and for the server's reply."""
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in argvs}
    for _ in range(n):
        for k, argv in argvs.items():
            t = time.perf_counter()
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t
            proc.returncode = os.waitstatus_to_exitcode(status)
            assert proc.returncode == 0, (argv, proc.returncode)
            times[k].append((wall, usage.ru_utime + usage.ru_stime))
    return {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in times.items()
    }


def main(n: int = 40) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="orcr-cli-bench-"))
    try:
        wpy = str(wheel_venv(tmp))
        with bench_server("[concurrency]\nmax = 1\n") as (_home, env):
            env = dict(env, PYTHONPATH="")  # the CLI needs no test plugin; the server has it
            env.pop("PYTHONPATH")
            run = ["agent", "run", "--provider", "testp", "x"]
            rows = []
            for label, py in (("wheel", wpy), ("editable", sys.executable)):
                (tmp / label).mkdir()
                assert subprocess.run(
                    [py, "-c", "import orcr_core; print(orcr_core.__file__)"],
                    env=env, capture_output=True, text=True, cwd=tmp,
                ).stdout.startswith(str(tmp) if label == "wheel" else str(ROOT))  # fmt: skip
                cli = [str(console_script(py, tmp / label))]
                subprocess.run(
                    [*cli, "agent", "ls"], env=env, check=True, cwd=tmp, stdout=subprocess.DEVNULL
                )  # warm: the .pyc files are written
                m = walls(
                    {"base": [py, "-c", "pass"], "ls": [*cli, "agent", "ls"], "run": [*cli, *run]},
                    dict(env, PWD=str(tmp)),
                    n,
                )
                rows.append((label, m))
                shutil.rmtree(tmp / label)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"medians of {n} calls each; load average {os.getloadavg()[0]:.1f}")
    print(f"{'install':9} {'':5} {'python -c pass':>15} {'agent ls':>10} {'agent run':>10}  ratios")
    for label, m in rows:
        for i, what in ((0, "wall"), (1, "cpu")):
            b, ls, rn = m["base"][i], m["ls"][i], m["run"][i]
            print(
                f"{label:9} {what:5} {b * 1000:12.1f} ms {ls * 1000:7.1f} ms {rn * 1000:7.1f} ms"
                f"  ls {ls / b:.2f}x  run {rn / b:.2f}x"
            )
    print(f"goal: the wheel's wall ratios <= {GOAL}x on a quiet machine ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
