"""Memory-aware admission: promotion also needs available RAM above a floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orcr_core.agents import memory
from orcr_core.config import Config, ConfigError, memory_floor
from orcr_core.testing import until

GiB = 2**30


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


def test_held_reason_from_a_faked_reading():
    cfg = Config({"concurrency": {"min_free_memory": "2GiB"}}, Path("x"))
    low = memory.held_reason(cfg, reading=lambda: (1 * GiB, 16 * GiB))
    assert low is not None and "1.0 GiB available" in low and "2.0 GiB" in low
    assert memory.held_reason(cfg, reading=lambda: (3 * GiB, 16 * GiB)) is None
    off = Config({"concurrency": {"min_free_memory": 0}}, Path("x"))
    assert memory.held_reason(off, reading=lambda: (0, 16 * GiB)) is None


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
