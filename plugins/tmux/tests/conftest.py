"""Fixtures for the tmux driver tests: real tmux servers on private sockets.

Every test gets its own short directory under /tmp (AF_UNIX paths are limited
to 107 bytes), ``TMUX_TMPDIR`` pointing into it (so even ``-L`` sockets and the
"default" server land there), no ``$TMUX``, and every tmux server started on a
socket in it is killed in teardown.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from orcr_tmux import TmuxDriver

from orcr_core.config import DEFAULTS, Config
from orcr_core.kit.testing import until


def make_config(socket: str) -> Config:
    data = {k: dict(v) for k, v in DEFAULTS.items()}
    data["tmux"] = {"socket": socket, "binary": "tmux"}
    return Config(data, Path("/nonexistent/orcr-config.toml"))


class Sandbox:
    """A private tmux world: a directory, and the sockets used in it."""

    def __init__(self, root: Path):
        self.root = root
        self.sockets: list[list[str]] = []

    def tmux(self, socket_flags: list[str], *args: str) -> subprocess.CompletedProcess:
        if socket_flags not in self.sockets:
            self.sockets.append(socket_flags)
        return subprocess.run(
            ["tmux", "-f", "/dev/null", *socket_flags, *args], capture_output=True, text=True
        )

    def kill_all(self) -> None:
        for flags in self.sockets:
            subprocess.run(["tmux", *flags, "kill-server"], capture_output=True)


@pytest.fixture
def sandbox(monkeypatch) -> Sandbox:
    root = Path(tempfile.mkdtemp(prefix="otx", dir="/tmp"))
    monkeypatch.setenv("TMUX_TMPDIR", str(root))
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    box = Sandbox(root)
    yield box
    box.kill_all()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def socket_path(sandbox: Sandbox) -> str:
    path = str(sandbox.root / "orcr.sock")
    sandbox.sockets.append(["-S", path])
    return path


@pytest.fixture
def driver(socket_path: str) -> TmuxDriver:
    d = TmuxDriver(make_config(socket_path))
    d.prompt_delay = 0.3
    return d


@pytest.fixture
def workdir(sandbox: Sandbox) -> Path:
    path = sandbox.root / "work dir #{pane_id} ;"
    path.mkdir()
    return path


PY = sys.executable

# Appends every line it reads (as JSON) to the file named by argv[1].
LINE_READER = textwrap.dedent(
    """
    import json, sys
    with open(sys.argv[1], "a") as out:
        for line in sys.stdin:
            out.write(json.dumps(line) + "\\n")
            out.flush()
    """
)

# Raw mode, bracketed paste on; records each read chunk with its arrival time.
RAW_RECORDER = textwrap.dedent(
    """
    import json, os, sys, time, tty
    tty.setraw(0)
    os.write(1, b"\\x1b[?2004hready\\r\\n")
    with open(sys.argv[1], "a") as out:
        while True:
            data = os.read(0, 4096)
            if not data:
                break
            out.write(json.dumps({"t": time.monotonic(), "hex": data.hex()}) + "\\n")
            out.flush()
    """
)


def read_json_lines(path: Path) -> list:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Helpers:
    """Shared helpers, handed to tests as the ``h`` fixture (importlib mode
    leaves test modules no way to import from conftest)."""

    PY = PY
    LINE_READER = LINE_READER
    RAW_RECORDER = RAW_RECORDER
    make_config = staticmethod(make_config)
    wait_for = staticmethod(until)
    read_json_lines = staticmethod(read_json_lines)

    def __init__(self, driver: TmuxDriver, sandbox: Sandbox, workdir: Path):
        self.driver = driver
        self.sandbox = sandbox
        self.workdir = workdir

    def start(self, argv, label: str = "alpha/one", env: dict | None = None, cwd=None):
        from orcr_core.contracts import StartSpec

        level1 = label.split("/")[0]
        ws = self.driver.ensure_workspace(level1)
        spec = StartSpec(
            workspace_id=ws,
            label=label,
            cwd=str(cwd or self.workdir),
            argv=tuple(argv),
            env={"ORCR_PATH": label, **(env or {})},
        )
        return self.driver.start(spec)

    def start_script(self, script: str, *args: str, label: str = "alpha/one"):
        return self.start([PY, "-c", script, *args], label=label)

    def pane_ids(self) -> set[str]:
        return {p.pane_id for p in self.driver.snapshot()}


@pytest.fixture
def h(driver: TmuxDriver, sandbox: Sandbox, workdir: Path) -> Helpers:
    return Helpers(driver, sandbox, workdir)
