"""Ceilings (issue 35): every agent in its own memory, process and CPU limits, the
fleet in one, and admission held by memory pressure.

The cgroup v1 tests run against the real kernel (these machines are root with the
memory, pids and cpu controllers mounted writable). Where the controllers are
absent they skip with the reason, except under CI, where they must run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid as uuidlib
from pathlib import Path

import pytest

from orcr_core import ceilings
from orcr_core.ceilings import pressure, v1
from orcr_core.config import ConfigError, validate
from orcr_core.kit.testing import until

MiB = 2**20
GiB = 2**30
#: grows by 4 MiB steps until the kernel stops it; bounded (1 GiB, exit 3) so that a
#: broken ceiling fails the test instead of taking the machine
HOG = "x = []\nwhile len(x) < 256:\n    x.append(bytearray(4 << 20))\nraise SystemExit(3)\n"
#: forks children that sleep until a fork is refused; then says how many it made
FORKS = (
    "import os, sys, time\nn = 0\nwhile True:\n    try:\n        pid = os.fork()\n"
    "    except OSError:\n        print('refused after', n, flush=True)\n        break\n"
    "    if pid == 0:\n        os.close(1)\n        time.sleep(60)\n        os._exit(0)\n    n += 1\n"
)


#: a fork loop: children that sleep, and on a refused fork it tries again (as a runaway
#: tool would); bounded (200 children, exit 3) so that a broken ceiling fails the test
FORK_LOOP = (
    "import os, time\nn = 0\nwhile n < 200:\n    try:\n        pid = os.fork()\n"
    "    except OSError:\n        time.sleep(0.05)\n        continue\n"
    "    if pid == 0:\n        time.sleep(300)\n        os._exit(0)\n    n += 1\n"
    "raise SystemExit(3)\n"
)


def _v1_or_skip() -> None:
    why = v1.unusable()
    if why and os.environ.get("CI"):
        pytest.fail(f"CI must run the cgroup tests on the real kernel: {why}")
    if why:
        pytest.skip(f"no writable cgroup v1 controllers here: {why}")


class _Config:
    def __init__(self, data: dict):
        self.data = data

    def get(self, key, default=None):
        node = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


def test_effective_ceilings_and_bad_values():
    """Per run over [limits.<provider>] over [limits]; memory_high auto = 90% of max.

    Planted: resolve reading the provider table after the run's -> fails (first assert)."""
    cfg = _Config(
        {"limits": {"memory_max": "50%", "pids_max": 4096, "claude": {"memory_max": "2GiB"}}}
    )
    got = ceilings.resolve(cfg, "claude", {"memory_max": "128MiB"}, 16 * GiB)
    assert got.memory_max == 128 * MiB and got.memory_high == int(128 * MiB * 0.9)
    assert ceilings.resolve(cfg, "claude", None, 16 * GiB).memory_max == 2 * GiB
    assert ceilings.resolve(cfg, "codex", None, 16 * GiB).memory_max == 8 * GiB
    assert ceilings.resolve(cfg, "codex", {"memory_max": "off"}, 16 * GiB).memory_max is None
    assert ceilings.asks(cfg, "claude", None) == ["memory_max"]  # a provider's own ceiling
    assert ceilings.asks(cfg, "codex", None) == []  # the global default only warns
    for bad, says in (
        ({"memory_max": "lots"}, "--memory-max = 'lots' is not allowed; use a size"),
        ({"memory_max": "1MiB"}, "below 4MiB"),
        ({"pids_max": 3}, "whole number from 8"),
        ({"cpu_weight": 0}, "whole number from 1 to 10,000"),
        ({"swap": 1}, "unknown ceiling 'swap'"),
    ):
        with pytest.raises(ceilings.LimitsError, match=says):
            ceilings.check_run(bad)
    with pytest.raises(ConfigError, match="limits.pids_max = 'many'"):
        validate({"limits": {"pids_max": "many"}})
    with pytest.raises(ConfigError, match="'cgroup_v3' is not allowed; use one of"):
        validate({"limits": {"mechanism": "cgroup_v3"}})
    with pytest.raises(ConfigError, match="up to 100"):
        validate({"concurrency": {"max_memory_pressure": 150}})


def test_v1_ceilings_on_the_real_kernel():
    """A hog past its 64 MiB ceiling is killed inside its group (the victim named from
    the kernel log), a sibling group is untouched; a fleet ceiling kills inside the
    fleet; a fork loop stops at pids.max; the sweep kills leftovers and removes groups.

    Planted: create() not writing memory.limit_in_bytes -> fails (the hog lives on
    until the fleet's ceiling: victim named as the fleet's). Planted: join.py not
    writing cgroup.procs -> fails (no kill counted in the group)."""
    _v1_or_skip()
    backend = v1.CgroupV1(f"test-{uuidlib.uuid4().hex[:8]}")
    backend.ensure_fleet(256 * MiB)
    hog, sibling, forks = (str(uuidlib.uuid4()) for _ in range(3))
    try:
        backend.create(hog, ceilings.Limits(memory_max=64 * MiB, memory_high=48 * MiB))
        backend.create(sibling, ceilings.Limits(memory_max=512 * MiB))
        calm = subprocess.Popen([*backend.launch_prefix(sibling), "sleep", "60"])
        done = subprocess.run([*backend.launch_prefix(hog), sys.executable, "-c", HOG], timeout=60)
        assert done.returncode == -signal.SIGKILL
        hit = backend.oom(hog)
        assert hit["kills"] >= 1 and hit["max"] == 64 * MiB and hit["peak"] >= 60 * MiB, hit
        assert hit.get("task") in (None, "python", "python3") and calm.poll() is None
        assert backend.usage(sibling)["oom_kills"] == 0
        assert backend.usage(hog)["memory"]["high"] == 48 * MiB
        # the fleet's ceiling (256 MiB) below the agent's own (512 MiB): killed in the fleet
        done = subprocess.run(
            [*backend.launch_prefix(sibling), sys.executable, "-c", HOG], timeout=60
        )
        assert done.returncode == -signal.SIGKILL and backend.oom(sibling)["fleet_max"] == 256 * MiB
        backend.create(forks, ceilings.Limits(pids_max=16))
        out = subprocess.run(
            [*backend.launch_prefix(forks), sys.executable, "-c", FORKS],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60,
        )  # fmt: skip
        assert out.stdout.startswith("refused after"), out
        assert backend.usage(forks)["pids"]["refused"] >= 1
        assert backend.usage(forks)["pids"]["current"] >= 10  # its sleeping children
        assert not backend.remove(forks)  # processes in it: it stays for the sweep
        until(
            lambda: not backend.sweep({sibling}) and not backend.group("pids", forks).exists(),
            10,
            "sweep",
        )
        assert backend.group("memory", sibling).exists()  # a live agent's group stays
        calm.kill()
        calm.wait()
    finally:
        backend.sweep(set())
        backend.drop_fleet()
    assert not any(p.exists() for p in backend.fleets.values())


def test_the_pids_note_names_the_ceiling_and_the_refusals():
    """An ended agent's error keeps what its pids ceiling refused: the kernel's count
    (``pids.events`` max), else a group found at its ceiling; nothing otherwise.

    Planted: pids_note reading pids.current instead of refused -> fails (first assert)."""
    from orcr_core.ceilings import step

    class Fake:
        name = "fake"
        pids: dict = {}

        def usage(self, uuid):
            return {"memory": {}, "pids": self.pids, "oom_kills": 0}

    fake, before = Fake(), ceilings.current()
    ceilings.install(ceilings.Detected(fake, "fake", "a test"))  # type: ignore[arg-type]
    try:
        fake.pids = {"current": 9, "max": 64, "refused": 37}
        assert step.pids_note("u") == "process ceiling 64 reached: forks refused 37 times"
        fake.pids = {"current": 64, "max": 64, "refused": 1}
        assert step.pids_note("u") == "process ceiling 64 reached: forks refused once"
        fake.pids = {"current": 64, "max": 64, "refused": None}  # no count kept
        assert step.pids_note("u") == "process ceiling 64 reached"
        fake.pids = {"current": 63, "max": 64, "refused": 0}
        assert step.pids_note("u") is None
        fake.pids = {"current": 3, "max": None, "refused": 0}  # no pids ceiling
        assert step.pids_note("u") is None
    finally:
        ceilings.install(before)


def test_pressure_reading(tmp_path, monkeypatch):
    """PSI's some avg10, from a file tests point at, and from the real kernel.

    Planted: reading the 'full' line -> fails (12.5)."""
    f = tmp_path / "memory"
    f.write_text(
        "some avg10=34.25 avg60=1.00 avg300=0.00 total=1\nfull avg10=12.50 avg60=0 avg300=0 total=1\n"
    )
    assert pressure.some_avg10(str(f)) == 34.25
    monkeypatch.setenv("ORCR_PRESSURE_FILE", str(f))
    held = pressure.held(_Config({"concurrency": {"max_memory_pressure": 20}}))
    assert held.startswith("memory pressure 34%: ") and "max_memory_pressure 20%" in held
    assert pressure.held(_Config({"concurrency": {"max_memory_pressure": 40}})) is None
    monkeypatch.setenv("ORCR_PRESSURE_FILE", str(tmp_path / "absent"))
    assert pressure.held(_Config({"concurrency": {"max_memory_pressure": 1}})) is None
    if Path(pressure.DEFAULT_FILE).exists():
        assert isinstance(pressure.some_avg10(pressure.DEFAULT_FILE), float)


def test_pressure_holds_promotion_and_says_so(orcr_home, tmp_path):
    """Pressure above concurrency.max_memory_pressure holds the queue, explained;
    it releases by itself when the pressure eases.

    Planted: pressure.held not consulted in _queue_step -> fails (promoted at once)."""
    psi = tmp_path / "memory"
    psi.write_text(
        "some avg10=55.00 avg60=0 avg300=0 total=0\nfull avg10=0 avg60=0 avg300=0 total=0\n"
    )
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax_memory_pressure = 30\n')
    orcr_home.start_server(extra_env={"ORCR_PRESSURE_FILE": str(psi)})
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="p/held", cwd="/")
        until(
            lambda: (o.get("p/held").get("held") or "").startswith("memory pressure 55%"),
            10,
            "held",
        )
        assert o.get("p/held")["status"] == "queued"
        assert "memory pressure 55%" in o.status()["held"]
        ls = orcr_home.run("agent", "ls", check=True).stdout
        assert "queued (held: memory pressure 55%)" in ls, ls
        psi.write_text("some avg10=2.00 avg60=0 avg300=0 total=0\n")
        until(lambda: o.get("p/held")["status"] == "working", 10, "p/held to start")


def _groups_of(uuid: str) -> list[Path]:
    found = []
    for c in v1.CONTROLLERS:
        base = v1.ROOT / c / v1.own(c).lstrip("/")
        found += [p for p in base.glob(f"orcr-*/{uuid}")]
    return found


def test_an_agent_past_its_memory_ceiling_ends_oom_and_the_rest_lives(live):
    """On tmux and the herdr emulator: a command agent allocating past --memory-max
    128MiB ends ``oom`` naming the ceiling and the peak; its sibling, the server and
    the multiplexer live on; the groups go when their agents end.

    Planted: lifecycle not asking step.verdict -> fails (ends exited).
    Planted: pipeline starting the unwrapped argv -> fails (the hog is never killed)."""
    _v1_or_skip()
    live.start_server()
    with live.sdk() as o:
        o.run(None, provider="command", path="c/calm", argv=["sleep", "300"], cwd="/",
              limits={"pids_max": 64})  # fmt: skip
        # no prompt: it starts idle, and grows at once (the end is oom whether the
        # kill comes before its pane is recorded or after)
        hog = o.run(None, provider="command", path="c/hog", cwd="/",
                    argv=[sys.executable, "-c", "import time\ntime.sleep(0.5)\n" + HOG],
                    limits={"memory_max": "128MiB"})  # fmt: skip
        a = until(
            lambda: (lambda r: r if r["status"] == "ended" else None)(o.get("c/hog")), 30, "oom"
        )
        assert a["exit_reason"] == "oom", a
        assert a["error"].startswith("memory ceiling 128 MiB reached (peak 12"), a["error"]
        assert "the kernel killed python" in a["error"] and not _groups_of(hog["uuid"])
        calm = until(
            lambda: (lambda r: r if r["status"] == "idle" else None)(o.get("c/calm")), 30, "calm"
        )
        assert calm["pids"]["max"] == 64 and calm["memory"]["current"] > 0, calm
        assert o.status()["ceilings"]["mechanism"] == "cgroup_v1"
        ls = live.run("agent", "ls", "--all", check=True).stdout
        assert "ended (oom: memory ceiling 128 MiB reached" in ls, ls
        calm_line = next(ln for ln in ls.splitlines() if ln.startswith("c/calm "))
        assert re.search(r" \d+M/\d+\.\dG ", calm_line), calm_line  # MEM: used/ceiling
        assert "ceilings cgroup_v1  fleet " in live.run("server", "status", check=True).stdout
        mem = o.status()["ceilings"]["agents"][calm["uuid"]]  # top's MEM, refreshed
        assert mem["current"] > 0 and mem["max"] == calm["memory"]["max"], mem
        top = live.run("top", "--once", check=True).stdout
        calm_line = next(ln for ln in top.splitlines() if ln.startswith("c/calm "))
        assert re.search(r" \d+M/\d+\.\dG( |$)", calm_line), top  # MEM: used/ceiling
        o.kill("c/calm")
        until(lambda: not _groups_of(calm["uuid"]), 30, "calm's groups to go")
    assert live.proc.poll() is None


def _ended(o, path: str) -> dict | None:
    r = o.get(path)
    return r if r["status"] == "ended" else None


def test_a_fork_loop_stops_at_its_pids_ceiling_and_the_agent_says_so(live):
    """On tmux and the herdr emulator: a command agent running a fork loop under
    ``--pids-max 16`` is contained (its group stays at 16, it keeps running, refused),
    an ``agent.pids_refused`` event says so while it lives, its sibling, the server and
    the multiplexer live on, and once ended its error names the pids ceiling.

    Planted: lifecycle not asking step.pids_note -> fails (the killed agent's error is None).
    Planted: reconcile not calling report_refusals -> fails (no agent.pids_refused).
    Planted: create() not writing pids.max -> fails (the loop is not contained: no refusal).

    Traced (its herdr leg was off, caf6eda): the first refusal is reported as soon as
    the group refuses, from the launch step on, which can be before the pane's start
    is recorded: on the herdr emulator at load 40 the start was recorded 0.2-4 s after
    it was asked, the refusal 0.7-4 s; read at the refusal, the row was still
    ``starting`` (1 run in 6 there). So it waits for the row to leave ``starting``."""
    _v1_or_skip()
    from orcr_core.sdk.watch import Watcher

    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "300ms"\n')
    live.start_server()
    with live.sdk() as o:
        watch = Watcher(o.client.path, autostart=False)
        try:
            o.run(None, provider="command", path="f/calm", argv=["sleep", "300"], cwd="/")
            bomb = o.run(None, provider="command", path="f/bomb", cwd="/",
                         argv=[sys.executable, "-c", FORK_LOOP], limits={"pids_max": 16})  # fmt: skip
            told, deadline = None, time.monotonic() + 20
            while told is None and time.monotonic() < deadline:
                ev = watch.next(timeout=1)
                if ev and ev["kind"] == "agent.pids_refused" and ev["agent"] == bomb["uuid"]:
                    told = ev["data"]
        finally:
            watch.close()
        assert told and told["pids_max"] == 16 and told["refused"] >= 1, told
        # the group refuses from the launch step on, and the refusal is reported then:
        # on the herdr emulator under load that came before the pane's start was recorded
        a = until(
            lambda: (lambda r: r if r["status"] != "starting" else None)(o.get("f/bomb")),
            30, "the bomb to leave starting",
        )  # fmt: skip
        assert a["status"] == "idle" and a["pids"]["current"] <= 16, a  # contained, running
        o.kill("f/bomb")
        a = until(lambda: _ended(o, "f/bomb"), 30, "the bomb to end")
        assert a["exit_reason"] == "killed", a
        assert re.fullmatch(
            r"process ceiling 16 reached: forks refused (once|\d+ times)", a["error"]
        ), a
        until(lambda: not _groups_of(bomb["uuid"]), 30, "the bomb's groups to go")
        assert o.get("f/calm")["status"] == "idle" and "f/calm" in live.mux.labels()
    assert live.proc.poll() is None


def test_a_fleet_ceiling_makes_the_kernels_kill_fall_inside_the_fleet(live):
    """On tmux and the herdr emulator: ``[limits] fleet_memory_max = "160MiB"``, below
    a hog's own 1 GiB ceiling: the kernel kills inside the fleet, the hog ends ``oom``
    naming the fleet's ceiling, ``server status`` shows the fleet at its ceiling, and
    the sibling, the server and the multiplexer (all but the sibling outside) live on.

    Planted: the agents' groups made beside the fleet group, not in it -> fails (the
    hog grows to its own 1 GiB ceiling: its error names that one, not the fleet's)."""
    _v1_or_skip()
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n[limits]\nfleet_memory_max = "160MiB"\n'
    )
    live.start_server()
    with live.sdk() as o:
        o.run(None, provider="command", path="m/calm", argv=["sleep", "300"], cwd="/")
        until(lambda: o.get("m/calm")["status"] == "idle", 30, "calm to start")
        o.run(None, provider="command", path="m/hog", cwd="/",
              argv=[sys.executable, "-c", "import time\ntime.sleep(0.5)\n" + HOG],
              limits={"memory_max": "1GiB"})  # fmt: skip
        a = until(lambda: _ended(o, "m/hog"), 30, "the hog to end")
        assert a["exit_reason"] == "oom", a
        assert a["error"].startswith(
            "fleet memory ceiling 160 MiB (limits.fleet_memory_max) reached"
        ), a["error"]
        fleet = o.status()["ceilings"]["fleet"]
        # the fleet reached its ceiling (v1 counts the kill in the hog's group, not here)
        assert fleet["max"] == 160 * MiB and fleet["peak"] >= 150 * MiB, fleet
        assert o.get("m/calm")["status"] == "idle" and "m/calm" in live.mux.labels()
    assert live.proc.poll() is None


def test_an_oom_end_is_notified_naming_the_ceiling():
    """agent_failed covers oom, with the error that names the ceiling.

    Planted: "oom" left out of the agent_failed reasons -> fails (no notification)."""
    from orcr_core.notify.rules import classify

    error = "memory ceiling 128 MiB reached (peak 128 MiB): the kernel killed python (pid 7)"
    data = {"to": "ended", "exit_reason": "oom", "path": "c/hog", "error": error}
    rule, subject, fields = classify({"kind": "agent.status", "data": data}, {})
    assert (rule, subject) == ("agent_failed", "c/hog")
    assert fields["text"] == f"c/hog ended oom: {error}"


def test_doctor_names_the_mechanism_and_pressure(orcr_home):
    """``orcr doctor`` says which mechanism a server here would use, and the PSI
    reading; with ``limits.mechanism = "none"`` it warns that agents run unbounded.

    Planted: check_ceilings left out of Doctor.run -> fails (no ceilings row)."""
    _v1_or_skip()
    import json

    def rows() -> dict:
        out = orcr_home.run("doctor", "--json").stdout
        return {c["check"]: c for c in json.loads(out)["checks"]}

    got = rows()
    assert got["ceilings"]["level"] == "ok" and got["ceilings"]["detail"].startswith("cgroup_v1")
    assert got["pressure"]["detail"].startswith("memory some avg10 ")
    orcr_home.config('[driver]\nname = "test"\n[limits]\nmechanism = "none"\n')
    got = rows()["ceilings"]
    assert got["level"] == "warn" and "limits.mechanism = none" in got["detail"], got


def test_a_ceiling_no_mechanism_holds_is_refused_at_admission(orcr_home):
    """With no mechanism (``limits.mechanism = "none"``), a run that asks for a ceiling
    is refused ``limits_unavailable`` with the reason; one that does not is admitted
    (the global default only warns). A bad flag value names the flag and the range.

    Planted: check_limits not called in queue.admit -> fails (admitted)."""
    from orcr_core.sdk.client import ServerError

    orcr_home.config('[driver]\nname = "test"\n[limits]\nmechanism = "none"\n')
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        with pytest.raises(ServerError) as e:
            o.run("x", provider="testp", path="r/asks", cwd="/", limits={"memory_max": "128MiB"})
        assert e.value.code == "limits_unavailable"
        assert "memory_max" in e.value.message and "limits.mechanism = none" in e.value.message
        assert o.run("x", provider="testp", path="r/plain", cwd="/")["status"] == "queued"
    bad = orcr_home.run("agent", "run", "-p", "testp", "--pids-max", "3", "x")
    assert bad.returncode != 0 and "--pids-max = 3 is not allowed" in bad.stderr, bad.stderr
