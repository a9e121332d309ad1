"""Memory-aware admission: promotion also needs available RAM above a floor."""

from __future__ import annotations

import json
import sys

import pytest

from orcr_core.agents import memory
from orcr_core.config import ConfigError, memory_floor
from orcr_core.kit.testing import until

GiB = 2**30
MiB = 2**20


@pytest.mark.parametrize(
    "value, total, floor",
    [
        ("2GiB", 16 * GiB, 2 * GiB),
        ("512MiB", 16 * GiB, 512 * 2**20),
        ("1.5GB", 16 * GiB, 1_500_000_000),
        ("10%", 16 * GiB, int(1.6 * GiB)),
        ("0", 16 * GiB, 0),
        (0, 16 * GiB, 0),
        ("auto", 24 * GiB, 2 * GiB),  # 10% would be 2.4 GiB: the smaller wins
        ("auto", 8 * GiB, int(0.8 * GiB)),
        ("100000GiB", 16 * GiB, 100000 * GiB),  # valid: it simply holds every promotion
    ],
)
def test_floor_sizes_and_shares(value, total, floor):
    assert memory_floor(value, total) == pytest.approx(floor, abs=1)


@pytest.mark.parametrize("bad", ["-1", "lots", "150%", "2 gigs", True, -5, "%"])
def test_bad_floor_names_what_is_allowed(bad):
    with pytest.raises(ConfigError) as e:
        memory_floor(bad, 16 * GiB)
    assert "concurrency.min_free_memory" in str(e.value) and "2GiB" in str(e.value)


def test_held_reason_names_available_reserved_floor_and_the_next_agents_need():
    r = memory.Reading(1 * GiB, 16 * GiB, 2 * GiB)
    low = r.reason("claude", 256 * MiB)
    assert "1.0 GiB available" in low and "min_free_memory needs 2.0 GiB" in low
    assert "next claude agent about 256 MiB" in low and "reserved" not in low
    r = memory.Reading(3 * GiB, 16 * GiB, 2 * GiB, reserved=512 * MiB, loading=[{}, {}])
    assert "512 MiB reserved for 2 agents loading" in r.reason("codex", 300 * MiB)


def test_a_budget_takes_estimates_until_the_headroom_no_longer_covers_one():
    r = memory.Reading(3 * GiB, 16 * GiB, 2 * GiB)
    b = memory.Budget(600 * MiB, {"codex": 400 * MiB}, r)
    assert b.take("claude") and b.held() is None  # the documented default: 256 MiB
    assert not b.take("codex") and "next codex agent about 400 MiB" in b.held()
    b.give_back("claude")
    assert b.take("codex")


def _starts(home) -> list[str]:
    """Promoted agents in promotion order, from the event log."""
    return [
        e["agent"]
        for e in home.events()
        if e["kind"] == "agent.status" and e["data"]["to"] == "starting"
    ]


def test_queue_holds_for_memory_then_releases_in_fifo_order_under_the_caps(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 2\nmin_free_memory = "100000GiB"\n'
        '[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    uuids = []
    for i in range(3):
        out = orcr_home.run("agent", "run", "--provider", "testp", "--path", f"m/a{i}", "hi")
        assert out.returncode == 0, out.stderr
        uuids.append(out.stdout.split()[1])
    status = until(
        lambda: (s := json.loads(orcr_home.run("server", "status", "--json").stdout))["held"] and s
    )
    assert "memory" in status["held"] and status["queue_depth"] == 3
    got = orcr_home.get("m/a0")
    assert got["status"] == "queued" and "min_free_memory" in got["held"]
    assert "held: memory" in orcr_home.run("server", "status", check=True).stdout
    assert _starts(orcr_home) == []  # held: nothing promoted

    orcr_home.run("config", "set", "concurrency.min_free_memory", "0", check=True)
    until(lambda: len(_starts(orcr_home)) == 2)
    assert _starts(orcr_home) == uuids[:2]  # FIFO, and the global cap of 2 still binds
    status = orcr_home.status()
    assert status["held"] is None and status["queue_depth"] == 1


def _mem_home(orcr_home, **state):
    """Load tests/plugins/orcr_test_memory into the server; return its state writer
    (the file is written here: importing the plugin would patch this process)."""
    orcr_home.env["ORCR_PLUGIN_MODULES"] = "orcr_test_driver,orcr_test_memory"
    path = orcr_home.path / "testmemory.json"

    def write(**more) -> None:
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(more)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    write(**state)
    return write


def _memory_status(home) -> dict:
    return json.loads(home.run("server", "status", "--json", check=True).stdout)


def test_loading_agents_reserve_their_footprint_so_a_freed_gap_promotes_only_what_fits(
    orcr_home,
):
    """Issue 19 item 4: 100 MiB above the floor used to promote a whole queue at
    once; the agents still loading now reserve their estimate, learnt per provider."""
    write = _mem_home(
        orcr_home, available=1 * GiB + 600 * MiB, total=16 * GiB, settle=600, footprints={}
    )
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmin_free_memory = "1GiB"\n'
        '[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    uuids = []
    for i in range(6):
        out = orcr_home.run("agent", "run", "--provider", "testp", "--path", f"m/a{i}", "hi")
        assert out.returncode == 0, out.stderr
        uuids.append(out.stdout.split()[1])
    # 600 MiB of headroom covers two agents at the default 256 MiB, not three
    s = until(
        lambda: (s := _memory_status(orcr_home))["held"] and s["queue_depth"] == 4 and s,
        what="two agents promoted, four held for memory",
    )
    assert _starts(orcr_home) == uuids[:2]
    assert s["memory"]["reserved"] == 512 * MiB and len(s["memory"]["loading"]) == 2
    assert s["memory"]["estimates"]["testp"] == {"bytes": 256 * MiB, "learnt_from": 0}
    assert "512 MiB reserved for 2 agents loading" in s["held"]
    text = orcr_home.run("server", "status", check=True).stdout
    assert "reserved 512 MiB (2 loading)" in text and "testp 256 MiB (default)" in text
    ls = orcr_home.run("agent", "ls", check=True).stdout
    assert sum("queued (held: memory)" in line for line in ls.splitlines()) == 4

    # they load: 300 MiB each, taken from available; nothing left to reserve, no room
    write(available=1 * GiB, footprints={"m/a0": 300 * MiB, "m/a1": 300 * MiB})
    until(lambda: _memory_status(orcr_home)["memory"]["reserved"] == 0)
    # loaded (past the settle time): testp's estimate is learnt from them
    write(settle=0)
    until(lambda: _memory_status(orcr_home)["memory"]["estimates"]["testp"]["learnt_from"] == 2)
    # 700 MiB frees (two agents elsewhere ended): two more fit at 300 MiB, not three
    write(settle=600, available=1 * GiB + 700 * MiB)
    s = until(
        lambda: (s := _memory_status(orcr_home))["queue_depth"] == 2 and s["held"] and s,
        what="two more promoted at the learnt 300 MiB, two held",
    )
    assert _starts(orcr_home) == uuids[:4]  # FIFO
    assert s["memory"]["reserved"] == 600 * MiB and "next testp agent about 300 MiB" in s["held"]
    assert orcr_home.get("m/a4")["status"] == "queued" and "memory" in orcr_home.get("m/a4")["held"]


def test_a_footprint_is_the_anonymous_memory_of_the_pane_process_tree():
    """measure() reads the tree under the pane's process (the row's ``pid:…@start``),
    children included, and counts their own (anonymous) memory, not shared pages."""
    import subprocess
    import types

    import psutil

    child = (
        "import time; x = bytearray(80 * 2**20); x[::4096] = b'x' * len(x[::4096]); time.sleep(60)"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])",
        ]
    )
    try:
        started = psutil.Process(parent.pid).create_time()
        row = types.SimpleNamespace(uuid="u1", pane_process=f"pid:{parent.pid}@{started:.2f}")
        unknown = types.SimpleNamespace(uuid="u2", pane_process=None)
        got = until(
            lambda: (m := memory.measure(None, [row, unknown]))["u1"] and m["u1"] > 80 * MiB and m,
            what="the child's 80 MiB measured",
        )
        assert got["u2"] is None  # no process known yet: the whole estimate is reserved
        assert got["u1"] < 200 * MiB  # the interpreter's shared pages are not counted
    finally:
        parent.kill()
        parent.wait()
