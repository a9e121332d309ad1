"""The v2 mimic against the real kernel, the detection order, and the v2
backend under a real server (issue 35 item 5).

``test_the_mimic_answers_as_the_real_v2_kernel`` runs one sequence of writes on
this machine's real unified hierarchy (whose one controller is hugetlb) and on
the mimic, and wants the same answer to each: the rules the v2 backend is
tested against are the kernel's, no stricter and no looser, where this machine
can show them. The memory, pids and cpu files themselves cannot be compared
here (docs/ceilings.md).
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid as uuidlib
from pathlib import Path

import pytest

from orcr_core import ceilings
from orcr_core.ceilings import Limits, v1, v2
from orcr_core.ceilings import detection as detect_mod
from orcr_core.ceilings.cgroupfs import KernelFs
from orcr_core.ceilings.mimic import MimicFs
from orcr_core.kit.testing import until

FAKE = Path(__file__).parent / "fakes" / "fake_systemd.py"
START = "/user.slice/user-0.slice/user@0.service/app.slice/orcr.service"
REAL_V2 = Path("/sys/fs/cgroup/unified")


def _try(fn, *args) -> str:
    try:
        out = fn(*args)
    except OSError as exc:
        return errno.errorcode[exc.errno]
    return "ok" if out is None or out is True else str(out)


def _sequence(fs: KernelFs, p: str) -> list[str]:
    """What the kernel answers, step by step, in group ``p`` whose parent enables
    hugetlb (and nothing else) for it."""
    out = [
        _try(fs.write, p, "cgroup.subtree_control", "+memory"),  # not offered: ENOENT
        _try(fs.write, p, "cgroup.subtree_control", "hugetlb"),  # no sign: EINVAL
        _try(fs.write, p, "cgroup.controllers", "hugetlb"),  # read-only
        _try(fs.mkdir, f"{p}/a"),
        str(fs.exists(f"{p}/a", "hugetlb.2MB.max")),  # not enabled in p yet: absent
        _try(fs.write, f"{p}/a", "hugetlb.2MB.max", "max"),  # ENOENT
        _try(fs.write, p, "cgroup.subtree_control", "+hugetlb"),
        str(fs.exists(f"{p}/a", "hugetlb.2MB.max")),  # now there
    ]
    sleeper = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        out += [
            _try(fs.write, p, "cgroup.procs", str(sleeper.pid)),  # p enables: EBUSY
            _try(fs.write, f"{p}/a", "cgroup.procs", str(sleeper.pid)),
            fs.read(f"{p}/a", "cgroup.procs").strip() == str(sleeper.pid) and "listed" or "not",
            _try(fs.write, f"{p}/a", "cgroup.subtree_control", "+hugetlb"),  # a has one: EBUSY
            _try(fs.write, f"{p}/a", "cgroup.procs", str(gone.pid)),  # ESRCH
            _try(fs.write, f"{p}/a", "cgroup.procs", "abc"),  # EINVAL
            _try(fs.rmdir, f"{p}/a"),  # a process in it: EBUSY
        ]
    finally:
        sleeper.kill()
        sleeper.wait()
    until(lambda: not fs.read(f"{p}/a", "cgroup.procs").split(), 5, "the sleeper to leave")
    out += [
        _try(fs.write, f"{p}/a", "cgroup.subtree_control", "+hugetlb"),  # empty now: ok
        _try(fs.write, p, "cgroup.subtree_control", "-hugetlb"),  # a enables it: EBUSY
        _try(fs.mkdir, f"{p}/a/b"),
        _try(fs.rmdir, f"{p}/a"),  # a child: EBUSY
        _try(fs.write, f"{p}/a", "cgroup.subtree_control", "-hugetlb"),
        _try(fs.write, p, "cgroup.subtree_control", "-hugetlb"),
        str(fs.exists(f"{p}/a", "hugetlb.2MB.max")),  # gone with it
        _try(fs.rmdir, f"{p}/a/b"),
        _try(fs.rmdir, f"{p}/a"),
        _try(fs.mkdir, f"{p}/nope/deeper"),  # ENOENT
    ]
    return out


def test_the_mimic_answers_as_the_real_v2_kernel(tmp_path):
    """Planted: the mimic letting a process join a group that enables a controller
    (no EBUSY) -> fails; the mimic making a child's hugetlb files before the parent
    enables it -> fails."""
    real = KernelFs(REAL_V2)
    if (
        not (REAL_V2 / "cgroup.controllers").exists()
        or "hugetlb" not in real.read("/", "cgroup.controllers").split()
        or not os.access(REAL_V2 / "cgroup.subtree_control", os.W_OK)
    ):
        pytest.skip("no writable cgroup v2 hierarchy with hugetlb at /sys/fs/cgroup/unified")
    probe = f"/orcr-probe-{uuidlib.uuid4().hex[:8]}"
    had = "hugetlb" in real.read("/", "cgroup.subtree_control").split()
    real.mkdir(probe)
    try:
        if not had:
            real.write("/", "cgroup.subtree_control", "+hugetlb")
        seen = _sequence(real, probe)
    finally:
        for g in (f"{probe}/a/b", f"{probe}/a", probe):
            try:
                real.rmdir(g)
            except OSError:
                pass
        if not had:
            try:
                real.write("/", "cgroup.subtree_control", "-hugetlb")
            except OSError:
                pass  # EBUSY: another run's probe enables it now; it disables it after
    mimic = MimicFs.make(tmp_path / "cg", "/probe", controllers=("hugetlb",))
    assert _sequence(mimic, "/probe") == seen
    assert seen[:3] == ["ENOENT", "EINVAL", "EINVAL"], seen  # what the kernel said here


def _fake_systemd(tmp: Path, monkeypatch) -> None:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for tool in ("systemd-run", "systemctl"):
        (bin_dir / tool).symlink_to(FAKE)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SYSTEMD_STATE", str(tmp / "systemd"))


class _Config(dict):
    def get(self, key, default=None):
        return super().get(key, default)


def test_detection_order_v2_then_systemd_then_v1(tmp_path, monkeypatch):
    """auto: a delegated v2 group first, then a systemd user manager, then cgroup v1,
    then none; a named mechanism that does not work is none with its reason.

    Planted: ORDER with systemd before cgroup_v2 -> fails (first assert)."""
    auto = _Config({"limits.mechanism": "auto"})
    MimicFs.make(tmp_path / "deleg", START)
    monkeypatch.setenv("ORCR_CGROUP_V2_ROOT", str(tmp_path / "deleg"))
    _fake_systemd(tmp_path, monkeypatch)
    found = ceilings.detect(auto, "t1")
    assert found.mechanism == "cgroup_v2", found
    assert "mimic" in found.reason and "never on a real kernel" in found.reason
    assert found.as_dict()["tested"] == detect_mod.TESTED["cgroup_v2"]
    # the user manager's group offers memory and pids; the service's is not ours
    MimicFs.make(tmp_path / "plain", START, delegated=False)
    monkeypatch.setenv("ORCR_CGROUP_V2_ROOT", str(tmp_path / "plain"))
    found = ceilings.detect(auto, "t1")
    assert found.mechanism == "systemd" and "fake systemd-run" in found.reason, found
    forced = ceilings.detect(_Config({"limits.mechanism": "cgroup_v2"}), "t1")
    assert (
        forced.backend is None
        and forced.reason.startswith("limits.mechanism = cgroup_v2, but cgroup_v2: ")
        and "not delegated" in forced.reason
    ), forced.reason
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no systemd-run that answers
    monkeypatch.setenv("FAKE_SYSTEMD_STATE", str(tmp_path / "none"))
    found = ceilings.detect(auto, "t1")
    want = "cgroup_v1" if v1.unusable() is None else "none"
    assert found.mechanism == want, found
    if want == "cgroup_v1":
        assert found.reason.endswith("tested on a real kernel")
    assert ceilings.detect(_Config({"limits.mechanism": "none"}), "t1").mechanism == "none"


def test_a_server_on_a_delegated_v2_subtree(orcr_home, tmp_path):
    """A real server pointed at a mimic v2 tree (ORCR_CGROUP_V2_ROOT): it moves itself
    into its leaf, makes the fleet, and a command agent's process runs inside its
    own group with its ceilings; ``server status`` and ``doctor`` name cgroup_v2 and
    say it was tested only against a mimic; the group goes when the agent ends.

    Planted: detect.ORDER without cgroup_v2 -> fails (cgroup_v1 named)."""
    tree = tmp_path / "cg"
    fs = MimicFs.make(tree, START)
    env = {"ORCR_CGROUP_V2_ROOT": str(tree)}
    doctor = orcr_home.run("doctor", env=env).stdout
    assert "cgroup_v2: delegated group " + START in doctor, doctor
    assert "never on a real kernel" in doctor
    sock = orcr_home.path / "tmux.sock"
    orcr_home.config(
        f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n[timings]\nreconcile_every = "500ms"\n'
    )  # the group goes at the agent's end, or at the next pass once its process is gone
    try:
        _on_tmux(orcr_home, env, fs)
    finally:
        orcr_home.stop_server()
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def _on_tmux(orcr_home, env: dict, fs: MimicFs) -> None:
    orcr_home.start_server(extra_env=env)
    with orcr_home.sdk() as o:
        status = o.status()["ceilings"]
        assert status["mechanism"] == "cgroup_v2" and "mimic" in status["tested"], status
        a = o.run(None, provider="command", path="v2/calm", argv=["sleep", "300"], cwd="/",
                  limits={"memory_max": "128MiB", "pids_max": 64})  # fmt: skip
        group = f"{START}/orcr-{_instance(orcr_home)}/{a['uuid']}"
        until(lambda: fs.exists(group) and fs.read(group, "cgroup.procs").split(), 30, "joined")
        assert fs.read(group, "memory.max").strip() == str(128 * 2**20)
        assert fs.read(group, "pids.max").strip() == "64"
        server_pid = str(orcr_home.proc.pid)
        assert server_pid in fs.read(f"{START}/orcr-server", "cgroup.procs").split()
        assert fs.check() == []
        line = orcr_home.run("server", "status", check=True).stdout
        assert "ceilings cgroup_v2 (tested only against a mimic" in line, line
        o.kill("v2/calm")
        until(lambda: not fs.exists(group), 30, "the agent's group to go")


def _instance(home) -> str:
    out = subprocess.run(
        ["python", "-c", "from orcr_core import dirs; print(dirs.instance_id())"],
        env=home.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def test_v2_as_a_systemd_service_needs_its_server_leaf(tmp_path, monkeypatch):
    """A server systemd started directly in its delegated group (no DelegateSubgroup=,
    systemd < 254) is not given cgroup v2: once the fleet enabled controllers there, a
    restart of the unit would fail with EBUSY while agents live (systemd issue 24064).
    Started in ``<unit>/orcr-server`` it is, and the fleet is made beside it.

    Planted: the INVOCATION_ID check left out of v2.unusable -> fails (first assert)."""
    monkeypatch.setenv("INVOCATION_ID", "0123abcd")  # what systemd gives a service
    plain = MimicFs.make(tmp_path / "a", START)
    why = v2.unusable(plain) or ""
    assert "DelegateSubgroup=orcr-server" in why and "restart" in why, why
    fs = MimicFs.make(tmp_path / "b", START + "/orcr-server", unit=START)
    assert v2.unusable(fs) is None
    backend = v2.CgroupV2("t2", fs=fs)
    assert backend.base == START and backend.fleet == START + "/orcr-t2"
    backend.ensure_fleet(None)
    uuid = str(uuidlib.uuid4())
    backend.create(uuid, Limits(memory_max=64 * 2**20))
    assert fs.read(f"{START}/orcr-t2/{uuid}", "memory.max").strip() == str(64 * 2**20)
    assert str(os.getpid()) in fs.read(START + "/orcr-server", "cgroup.procs").split()
    assert fs.check() == []
