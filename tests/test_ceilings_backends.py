"""One conformance suite over every ceilings backend (issue 35 item 5).

Each test runs on every backend through the one interface
(:class:`orcr_core.ceilings.Backend`), and checks what the kernel or the
service manager then SHOWS, not what the backend says of itself:

* ``cgroup_v1``: the real kernel here (root, v1 controllers read-write);
* ``cgroup_v2``: :class:`~orcr_core.ceilings.mimic.MimicFs`, a temp tree
  holding the kernel's v2 file protocol (this machine's v2 hierarchy has no
  memory, pids or cpu controller), never a real kernel;
* ``systemd``: ``tests/fakes/fake_systemd.py`` as ``systemd-run`` and
  ``systemctl`` on PATH (no systemd here), never a real systemd.

Planted bugs, each seen to fail here:
* v2 ``ensure_fleet`` writing the fleet's ``memory.max`` before enabling the
  controllers -> ``test_ceilings_written_are_what_the_kernel_shows[cgroup_v2]``
  fails (ENOENT: the file does not exist yet, as on the kernel).
* v2 not moving the server into its leaf before ``+memory`` -> same test fails
  (EBUSY: the no-internal-process rule).
* systemd's launch step without ``CPUWeight=`` -> same test fails (the scope's
  CPUWeight is [not set]).
* v1 ``create`` not writing ``pids.max`` -> same test fails (max shown).
* v2 ``sweep`` not killing (``cgroup.kill``) -> ``test_a_running_group_stays_until_swept``
  fails for v2 (the group stays: EBUSY); systemd ``sweep`` with neither ``kill``
  nor ``stop`` -> fails for systemd (``stop`` alone is enough: it signals too).
* v2 ``usage`` reading the fleet's ``memory.events`` -> ``test_the_kill_at_a_ceiling_is_
  reported_on_that_agent_only[cgroup_v2]`` fails (the sibling "killed" too).
* systemd ``usage`` ignoring ``Result=oom-kill`` -> the same test fails for systemd.
* ``step.verdict`` taking a peak systemd does not report (systemd < 256) as 0 -> the
  same test fails for systemd (the error blamed the fleet's ceiling).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid as uuidlib
from pathlib import Path

import pytest

from orcr_core import ceilings
from orcr_core.ceilings import Limits, step, v1, v2
from orcr_core.ceilings.mimic import MimicFs
from orcr_core.ceilings.systemd import SystemdScopes
from orcr_core.kit.testing import alive, until

MiB = 2**20
FAKE = Path(__file__).parent / "fakes" / "fake_systemd.py"
START = "/user.slice/user-0.slice/user@0.service/app.slice/orcr.service"
USER_MANAGER = "/user.slice/user-0.slice/user@0.service"
HOG = "x = []\nwhile len(x) < 256:\n    x.append(bytearray(4 << 20))\nraise SystemExit(3)\n"


class _V1:
    name = "cgroup_v1"

    def __init__(self, tmp: Path, monkeypatch) -> None:
        why = v1.unusable()
        if why and os.environ.get("CI"):
            pytest.fail(f"CI must run the cgroup v1 backend on the real kernel: {why}")
        if why:
            pytest.skip(f"no writable cgroup v1 controllers here: {why}")
        self.backend = v1.CgroupV1(f"test-{uuidlib.uuid4().hex[:8]}")

    def _int(self, c: str, uuid: str | None, file: str) -> int | None:
        base = self.backend.fleets[c] if uuid is None else self.backend.group(c, uuid)
        n = int((base / file).read_text().split()[0]) if (base / file).exists() else None
        return None if n is None or n >= 2**62 else n

    def shown(self, uuid: str) -> dict:
        pids = (self.backend.group("pids", uuid) / "pids.max").read_text().strip()
        return {
            "memory_max": self._int("memory", uuid, "memory.limit_in_bytes"),
            "memory_high": self._int("memory", uuid, "memory.soft_limit_in_bytes"),
            "pids_max": int(pids) if pids.isdigit() else None,
            "cpu_weight": self._int("cpu", uuid, "cpu.shares") * 100 // 1024,
        }

    def fleet_max(self) -> int | None:
        return self._int("memory", None, "memory.limit_in_bytes")

    def members(self, uuid: str) -> list[int]:
        procs = self.backend.group("memory", uuid) / "cgroup.procs"
        return [int(p) for p in procs.read_text().split()] if procs.exists() else []

    def exists(self, uuid: str) -> bool:
        return any(self.backend.group(c, uuid).exists() for c in v1.CONTROLLERS)

    def kill_at_ceiling(self, uuid: str, proc: subprocess.Popen) -> None:
        proc.kill()  # the sleeper goes; a real hog meets the real ceiling
        proc.wait()
        hog = subprocess.run([*self.backend.launch_prefix(uuid), sys.executable, "-c", HOG])
        assert hog.returncode == -signal.SIGKILL

    def violations(self) -> list[str]:
        return []  # the real kernel refuses what it does not allow


class _V2(_V1):
    name = "cgroup_v2"

    def __init__(self, tmp: Path, monkeypatch) -> None:
        self.fs = MimicFs.make(tmp / "cgroup", START)
        self.backend = v2.CgroupV2(f"test-{uuidlib.uuid4().hex[:8]}", fs=self.fs)

    def _v(self, group: str, file: str) -> int | None:
        text = self.fs.read(group, file).strip()
        return int(text) if text.isdigit() else None

    def shown(self, uuid: str) -> dict:
        g = self.backend.group(uuid)
        files = ("memory.max", "memory.high", "pids.max", "cpu.weight")
        keys = ("memory_max", "memory_high", "pids_max", "cpu_weight")
        return {k: self._v(g, f) for k, f in zip(keys, files, strict=True)}

    def fleet_max(self) -> int | None:
        return self._v(self.backend.fleet, "memory.max")

    def members(self, uuid: str) -> list[int]:
        g = self.backend.group(uuid)
        return (
            [int(p) for p in self.fs.read(g, "cgroup.procs").split()] if self.exists(uuid) else []
        )

    def exists(self, uuid: str) -> bool:
        return self.fs.exists(self.backend.group(uuid))

    def kill_at_ceiling(self, uuid: str, proc: subprocess.Popen) -> None:
        assert self.fs.oom_kill(self.backend.group(uuid)) == proc.pid  # what the kernel does
        proc.wait()

    def violations(self) -> list[str]:
        return self.fs.check()


class _Systemd:
    name = "systemd"

    def __init__(self, tmp: Path, monkeypatch) -> None:
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        for tool in ("systemd-run", "systemctl"):
            (bin_dir / tool).symlink_to(FAKE)
        self.state = tmp / "systemd"
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_SYSTEMD_STATE", str(self.state))
        self.backend = SystemdScopes(f"test-{uuidlib.uuid4().hex[:8]}", tmp / "kept")

    def units(self) -> dict:
        f = self.state / "units.json"
        return json.loads(f.read_text()) if f.exists() else {}

    def shown(self, uuid: str) -> dict:
        props = self.units()[self.backend.scope(uuid)]["props"]

        def num(key: str) -> int | None:
            v = props.get(key, "infinity")
            return int(v) if v.isdigit() else None

        return {
            "memory_max": num("MemoryMax"),
            "memory_high": num("MemoryHigh"),
            "pids_max": num("TasksMax"),
            "cpu_weight": num("CPUWeight"),
        }

    def fleet_max(self) -> int | None:
        v = self.units()[self.backend.slice]["props"].get("MemoryMax", "infinity")
        return int(v) if v.isdigit() else None

    def members(self, uuid: str) -> list[int]:
        u = self.units().get(self.backend.scope(uuid))
        return [u["pid"]] if u and u.get("active") and alive(u["pid"]) else []

    def exists(self, uuid: str) -> bool:
        return self.backend.scope(uuid) in self.units()

    def kill_at_ceiling(self, uuid: str, proc: subprocess.Popen) -> None:
        units = self.units()  # the kernel kills, the manager records the scope's result
        units[self.backend.scope(uuid)]["result"] = "oom-kill"
        (self.state / "units.json").write_text(json.dumps(units))
        proc.kill()
        proc.wait()

    def violations(self) -> list[str]:
        calls = [json.loads(ln) for ln in (self.state / "argv.jsonl").read_text().splitlines()]
        return [" ".join(c) for c in calls if c[0] == "systemctl" and "--user" not in c]


@pytest.fixture(params=[_V1, _V2, _Systemd], ids=["cgroup_v1", "cgroup_v2", "systemd"])
def harness(request, tmp_path, monkeypatch):
    h = request.param(tmp_path, monkeypatch)
    started: list[subprocess.Popen] = []
    h.started = started
    yield h
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()
    h.backend.drop_all()


def _launch(h, uuid: str, argv: list[str] | None = None) -> subprocess.Popen:
    """The agent's argv behind the backend's launch step; waits until it is inside."""
    proc = subprocess.Popen([*h.backend.launch_prefix(uuid), *(argv or ["sleep", "60"])])
    h.started.append(proc)
    until(lambda: proc.pid in h.members(uuid) or proc.poll() is not None, 20, "the join")
    assert proc.poll() is None, f"the launch step exited {proc.returncode}"
    return proc


def test_ceilings_written_are_what_the_kernel_shows(harness):
    """The fleet's ceiling and an agent's four ceilings, as the kernel (or manager)
    shows them once the agent runs inside its group; its process is in the group
    from the launch step on; the backend reads the same back. Idempotent: a
    resumed start makes the fleet and the group again without error."""
    h, b = harness, harness.backend
    uuid = str(uuidlib.uuid4())
    want = Limits(memory_max=128 * MiB, memory_high=96 * MiB, pids_max=32, cpu_weight=50)
    for _ in range(2):
        b.ensure_fleet(512 * MiB)
        b.create(uuid, want)
    proc = _launch(h, uuid)
    assert h.shown(uuid) == want.as_dict()
    assert h.fleet_max() == 512 * MiB and b.fleet_usage()["max"] == 512 * MiB
    u = b.usage(uuid)
    assert (u["memory"]["max"], u["memory"]["high"], u["pids"]["max"]) == (
        128 * MiB, 96 * MiB, 32,
    )  # fmt: skip
    assert b.oom(uuid) is None and h.violations() == []
    b.ensure_fleet(None)  # the fleet ceiling lifted
    assert h.fleet_max() is None and proc.poll() is None


def test_the_kill_at_a_ceiling_is_reported_on_that_agent_only(harness):
    """The kernel kills at an agent's memory ceiling: ``oom`` says so with the
    ceiling; its sibling's says nothing."""
    h, b = harness, harness.backend
    hog, calm = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    b.ensure_fleet(1024 * MiB)
    b.create(hog, Limits(memory_max=64 * MiB))
    b.create(calm, Limits(memory_max=256 * MiB))
    proc, sibling = _launch(h, hog), _launch(h, calm)
    h.kill_at_ceiling(hog, proc)
    hit = b.oom(hog)
    assert hit and hit["kills"] >= 1 and hit["max"] == 64 * MiB, hit
    assert b.oom(calm) is None and sibling.poll() is None
    assert h.violations() == []
    before = ceilings.current()
    ceilings.install(ceilings.Detected(b, h.name, "test"))
    try:  # the agent's error, as lifecycle.transition gets it
        error, calm_error = step.verdict(hog), step.verdict(calm)
    finally:
        ceilings.install(before)
    assert error.startswith("memory ceiling 64 MiB reached (peak "), error
    assert "the kernel killed" in error and calm_error is None


def test_a_running_group_stays_until_swept(harness):
    """``remove`` refuses a group with a live process (the kernel would: EBUSY);
    ``sweep`` kills what is left in groups of agents not live and removes them,
    and leaves the live agents' groups alone."""
    h, b = harness, harness.backend
    gone, kept = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    b.ensure_fleet(None)
    for u in (gone, kept):
        b.create(u, Limits(pids_max=64))
    leftover, live = _launch(h, gone), _launch(h, kept)
    assert b.remove(gone) is False and h.exists(gone)
    until(lambda: gone in str(b.sweep({kept})) or not h.exists(gone), 20, "the sweep")
    until(lambda: leftover.poll() is not None, 10, "the leftover process to die")
    until(lambda: not h.exists(gone) or b.sweep({kept}) == [], 10, "the group to go")
    assert not h.exists(gone) and b.usage(gone) is None
    assert live.poll() is None and b.usage(kept) is not None
    live.kill()
    live.wait()
    until(lambda: b.remove(kept), 10, "an ended agent's group to go")
    assert not h.exists(kept)


def test_the_launch_step_fails_closed(harness):
    """An agent whose group cannot be joined never runs: v1/v2 with no group made,
    systemd with its scope's name already taken (systemd-run refuses it)."""
    h, b = harness, harness.backend
    uuid = str(uuidlib.uuid4())
    b.ensure_fleet(None)
    if h.name == "systemd":
        b.create(uuid, Limits())
        _launch(h, uuid)  # the scope exists: a second one of that name is refused
    ran = Path(os.environ.get("TMPDIR", "/tmp")) / f"orcr-ran-{uuid}"
    r = subprocess.run(
        [*b.launch_prefix(uuid), sys.executable, "-c", f"open({str(ran)!r}, 'w')"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert r.returncode != 0 and not ran.exists(), r.stderr


def test_systemd_status_readings_are_one_show_for_all_scopes(tmp_path, monkeypatch):
    """server status and top read every live agent's usage each refresh: with systemd
    that is one ``systemctl show`` of all the scopes, not one process per agent.

    Planted: usage() always fresh (no shared reading) -> fails (3 shows)."""
    h = _Systemd(tmp_path, monkeypatch)
    agents = [str(uuidlib.uuid4()) for _ in range(3)]
    for u in agents:
        h.backend.create(u, Limits(memory_max=64 * MiB))
    log = h.state / "argv.jsonl"
    seen = len(log.read_text().splitlines()) if log.exists() else 0
    got = [h.backend.usage(u)["memory"]["max"] for u in agents]
    calls = [json.loads(ln) for ln in log.read_text().splitlines()[seen:]]
    assert got == [64 * MiB] * 3 and [c[:3] for c in calls] == [["systemctl", "--user", "show"]]


def test_systemd_at_its_tasks_max_reads_as_process_ceiling_reached(tmp_path, monkeypatch):
    """systemd keeps no count of refused forks: ``refused`` is None (unknown), not 0,
    so a scope found at its TasksMax gives the agent "process ceiling N reached".

    Planted: ``refused`` reported as 0 -> fails (the note is None: 0 reads as none
    refused)."""
    h = _Systemd(tmp_path, monkeypatch)
    uuid = str(uuidlib.uuid4())
    h.backend.create(uuid, Limits(pids_max=8))
    proc = subprocess.Popen([*h.backend.launch_prefix(uuid), "sleep", "60"])
    try:
        until(lambda: proc.pid in h.members(uuid), 20, "the join")
        units = h.units()  # the kernel's count, as the manager shows it (TasksCurrent)
        units[h.backend.scope(uuid)]["tasks_current"] = 8
        (h.state / "units.json").write_text(json.dumps(units))
        before = ceilings.current()
        ceilings.install(ceilings.Detected(h.backend, h.name, "test"))
        try:
            assert step.pids_note(uuid) == "process ceiling 8 reached"
            pids = h.backend.usage(uuid, fresh=True)["pids"]
            assert pids == {"current": 8, "max": 8, "refused": None}, pids
        finally:
            ceilings.install(before)
    finally:
        proc.kill()
        proc.wait()
        h.backend.drop_all()


def test_refused_reads_what_usage_reports_for_pids(harness):
    """``refused`` (one file, asked of every live agent each reconciliation) is
    ``usage()["pids"]["refused"]``: a count once forks were refused; None on systemd.

    Planted: v1/v2 ``refused`` reading the ``max`` key of the wrong file -> fails."""
    h, b = harness, harness.backend
    uuid = str(uuidlib.uuid4())
    b.ensure_fleet(None)
    b.create(uuid, Limits(pids_max=3))
    argv = ["sh", "-c", "sleep 30 & sleep 30 & sleep 30 & sleep 30 & wait"]
    # not _launch: the shell may exit at its refused fork ("Cannot fork") before a
    # look finds it in the group (CI, load 20-35); the refusal is counted either way
    h.started.append(subprocess.Popen([*b.launch_prefix(uuid), *argv]))
    if isinstance(h, _V2):
        h.fs.refuse_fork(b.group(uuid))  # the mimic counts what the kernel would
    if isinstance(h, _Systemd):
        assert b.refused(uuid) is None and b.usage(uuid)["pids"]["refused"] is None
        return
    until(lambda: (b.refused(uuid) or 0) >= 1, 10, "a refused fork")
    assert b.refused(uuid) == b.usage(uuid)["pids"]["refused"]
