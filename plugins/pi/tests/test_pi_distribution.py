"""orcr-pi installed the way a third party's plugin is (issue 24 item 5).

A fresh venv gets orcr from this checkout (``pip install``, not editable); the test
builds orcr-pi's wheel and installs it beside orcr. Then: ``orcr plugins`` lists it
with its pinned range, ``orcr agent run --provider pi`` runs an agent on tmux (the fake
pi CLI, tests/fakes/pi), ``orcr uninstall orcr-pi`` leaves orcr working (a queued pi
agent is held with the reason, the server keeps serving, echo agents run) and
``orcr install ./plugins/pi`` from the local path brings it back.

To stay fast, orcr's dependencies (and pip) are linked into the venv from this test
environment's site-packages (orcr itself and orcr-pi are left out) and both
distributions are built without build isolation when ``wheel`` is there (the
``test`` extra has it), so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent
REPO = PLUGIN.parent.parent
FAKE_PI = REPO / "tests" / "fakes" / "pi"
#: what is not taken from this environment: orcr and orcr-pi themselves
LEFT_OUT = ("orcr", "_orcr", "__editable__")
#: orcr-pi's pinned range, read from its source (not imported: the test
#: environment need not have orcr-pi installed)
RANGE = re.search(
    r'supported_versions = "([^"]+)"', (PLUGIN / "orcr_pi" / "provider.py").read_text()
).group(1)

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
    pytest.mark.timeout(600),  # a venv, two builds, a server started four times
]


def _build_flags() -> list[str]:
    """Build from what is installed when it can build orcr (its [build-system] wants
    setuptools >= 69, and below 70.1 the wheel package too): offline, no isolation.
    Otherwise pip builds in isolation and must reach an index for setuptools."""
    try:
        from importlib.metadata import version

        setuptools = tuple(int(p) for p in version("setuptools").split(".")[:2])
        if setuptools < (70, 1):
            import wheel  # noqa: F401
    except (ImportError, ValueError):
        return []
    return ["--no-index", "--no-build-isolation"] if setuptools >= (69, 0) else []


class Venv:
    def __init__(self, path: Path, home: Path, sock: Path):
        self.path, self.home, self.sock = path, home, sock
        self.bin = path / "bin"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ORCR_", "PYTHON", "VIRTUAL_ENV", "TMUX"))
        }
        self.env.update(ORCR_HOME=str(home), PATH=f"{self.bin}:{os.environ['PATH']}")

    def run(self, *args: str, check: bool = True, timeout: float = 120, env=None):
        print(f"{time.monotonic():.1f} {' '.join(args)}", flush=True)
        res = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            env=dict(self.env, **(env or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(self.home),
        )
        if check and res.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {res.returncode}:\n{res.stderr}")
        return res

    def orcr(self, *args: str, **kw):
        return self.run("orcr", *args, **kw)

    def pip(self, *args: str, env=None):
        return self.run("python", "-m", "pip", "-q", *args, timeout=300, env=env)


def _doctor(venv) -> dict:
    """``orcr doctor --json``'s rows by check (its exit status is not the point here)."""
    out = venv.orcr("doctor", "--json", check=False).stdout
    return {r["check"]: r for r in json.loads(out)["checks"]}


@pytest.fixture(scope="module")
def venv():
    tmp = Path(tempfile.mkdtemp(prefix="orcr-dist-", dir="/tmp"))
    home = tmp / "h"
    home.mkdir()
    v = Venv(tmp / "venv", home, tmp / "tmux.sock")
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(v.path)], check=True, timeout=120
    )
    site = Path(sysconfig.get_paths()["purelib"])
    target = Path(
        v.run(
            "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        ).stdout.strip()
    )
    for entry in site.iterdir():  # linked, not copied: the venv never changes them
        if not entry.name.startswith(LEFT_OUT) and entry.name != "__pycache__":
            (target / entry.name).symlink_to(entry)
    build = build_dir = tmp / "wheels"
    v.pip("install", "--no-deps", *_build_flags(), str(REPO))
    source = tmp / "orcr-pi"  # built from a copy: the checkout gets no build/ folder
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "tests"))
    v.pip("wheel", "--no-deps", *_build_flags(), "-w", str(build), str(source))
    v.wheel = next(build_dir.glob("orcr_pi-*.whl"))
    v.source = source
    v.setup_seconds = time.monotonic() - started
    v.home.joinpath("config.toml").write_text(
        f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{v.sock}"\n'
        '[timings]\npoll_every = "100ms"\nprompt_confirm = "1s"\n'
        f'[providers.pi]\nargv = ["{FAKE_PI}"]\n'
        "[concurrency]\npi = 1\n"
    )
    try:
        yield v
    finally:
        v.orcr("server", "stop", check=False, timeout=60)
        subprocess.run(["tmux", "-S", str(v.sock), "kill-server"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def test_installed_beside_orcr_listed_run_uninstalled_and_installed_again(venv):
    """The whole life of a third-party provider plugin, in a venv of its own."""
    # orcr from the checkout, without the plugin: no pi provider
    assert venv.run(
        "python", "-c", "import orcr_core; print(orcr_core.__file__)"
    ).stdout.startswith(str(venv.path))
    assert "orcr-pi" not in venv.orcr("plugins").stdout
    assert "pi cli" not in _doctor(venv)
    r = venv.orcr("agent", "run", "--provider", "pi", "--path", "p/none", "hi", check=False)
    assert r.returncode != 0 and "unknown provider 'pi'" in r.stderr
    venv.orcr("server", "stop", check=False)

    # the wheel, installed beside orcr: listed with its pinned range
    venv.pip("install", "--no-deps", "--no-index", str(venv.wheel))
    rows = {r["name"]: r for r in json.loads(venv.orcr("plugins", "--json").stdout)}
    assert (rows["pi"]["distribution"], rows["pi"]["providers"]) == ("orcr-pi", ["pi"])
    assert f"  providers: pi ({RANGE})" in venv.orcr("plugins").stdout
    # orcr doctor checks its CLI too, from the adapter's own ``cli`` (no core change)
    row = _doctor(venv)["pi cli"]
    assert row["check"] == "pi cli" and (row["level"] == "ok" or "pi" in row["detail"]), row

    # an agent of it runs: prompt, answer, a second turn
    venv.orcr("agent", "run", "--provider", "pi", "--path", "p/one", "hello from orcr")
    assert venv.orcr("agent", "wait", "p/one", "--timeout", "60s").stdout.strip() == "p/one idle"
    assert venv.orcr("agent", "read", "p/one").stdout.strip() == "hello from orcr"
    venv.orcr("agent", "send", "p/one", "[tool] second")
    venv.orcr("agent", "wait", "p/one", "--timeout", "60s")
    got = json.loads(venv.orcr("agent", "get", "p/one", "--json").stdout)
    assert (got["status"], got["turn"], got["agent_session"]["kind"]) == ("idle", 2, "path")
    assert got["agent_session"]["value"].endswith("pi-session.jsonl")
    assert venv.orcr("agent", "read", "p/one").stdout.strip() == "second"
    # the cap (pi = 1) holds a second one in the queue
    venv.orcr("agent", "run", "--provider", "pi", "--path", "p/two", "queued one")
    assert json.loads(venv.orcr("agent", "get", "p/two", "--json").stdout)["status"] == "queued"

    # uninstalled: orcr keeps working, the queued pi agent is held with the reason
    venv.orcr("server", "stop")
    venv.orcr("uninstall", "orcr-pi", "--yes")
    assert "orcr-pi" not in venv.orcr("plugins").stdout
    venv.orcr("agent", "kill", "p/one")  # frees pi's slot: only the plugin holds p/two now
    two = json.loads(venv.orcr("agent", "get", "p/two", "--json").stdout)
    assert two["status"] == "queued" and two["held"].startswith("provider not installed"), two
    assert "'pi'" in two["held"] and "orcr install" in two["held"]
    assert "queued (held: provider not installed)" in venv.orcr("agent", "ls").stdout
    venv.orcr("agent", "run", "--provider", "echo", "--path", "e/one", "still here")
    venv.orcr("agent", "wait", "e/one", "--timeout", "60s")
    assert json.loads(venv.orcr("server", "status", "--json").stdout)["pid"]
    assert json.loads(venv.orcr("agent", "get", "p/two", "--json").stdout)["status"] == "queued"

    # orcr install from the local path: back, and the held agent starts
    venv.orcr("server", "stop")
    venv.orcr(
        "install",
        str(venv.source),  # plugins/pi (a copy of it)
        env={"PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1", "PIP_NO_BUILD_ISOLATION": "0"}
        if _build_flags()
        else {},
    )
    assert f"  providers: pi ({RANGE})" in venv.orcr("plugins").stdout
    venv.orcr("agent", "wait", "p/two", "--timeout", "60s")
    assert venv.orcr("agent", "read", "p/two").stdout.strip() == "queued one"
    print(f"venv with orcr and orcr-pi's wheel: {venv.setup_seconds:.1f}s")
