"""Memory-aware admission: a promotion also needs free RAM above a floor.

A count cap alone cannot protect a machine whose agents grow: ten TUIs that
each take 3 GiB exhaust a 24 GiB box long before ``concurrency.max = 25``.
``[concurrency] min_free_memory`` is a floor on the memory psutil reports as
available; while it is not met, queued rows stay queued (FIFO order kept) and
the reason shows in ``agent get``, ``agent ls`` and ``server status``.

A promoted TUI takes seconds to reach its footprint, so the memory available
at promotion does not yet show what the agents just promoted will take (all of
six queued agents were once promoted within a millisecond and then took the
machine 0.76 GiB under the floor). So each agent that is promoted but not yet
loaded -- ``starting``, or started less than :data:`LOAD_SETTLE` ago --
*reserves* its provider's estimated footprint less what it already uses, and a
row is promoted only while the headroom (available - floor - reserved) covers
its own estimate. The estimate per provider is learnt from the live, loaded
agents of that provider (the median of their measured footprints; the last
one learnt is kept while none is live), else :data:`DEFAULT_FOOTPRINT`. A footprint is the resident anonymous memory (RSS
less shared, file-backed pages) of the agent's pane process tree: what it
takes from ``available``, since the program's shared binary and libraries are
page cache the kernel can reclaim.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orcr_core.config import Config, memory_floor

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency; keep promotion possible
    psutil = None

MiB = 2**20
#: the footprint reserved for an agent of a provider none of whose agents is measured yet
DEFAULT_FOOTPRINT = 256 * MiB
#: seconds after its promotion during which an agent still counts as loading
LOAD_SETTLE = 15.0
#: seconds a measured footprint is reused before the process tree is read again
MEASURE_EVERY = 1.0


def available() -> tuple[int, int]:
    """(available, total) bytes of RAM, as the kernel estimates what can be had."""
    vm = psutil.virtual_memory()
    return vm.available, vm.total


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _size(n: float) -> str:
    return _gib(n) if abs(n) >= 2**30 else f"{n / MiB:.0f} MiB"


def measure(server: ServerContext, agents: list) -> dict[str, int | None]:
    """Each agent's footprint in bytes (None: no process of it is known yet)."""
    from orcr_core.agents import procs

    roots = {a.uuid: procs.root(a) for a in agents}
    if not any(roots.values()):
        return {uuid: None for uuid in roots}
    kids = procs.children_map()
    out: dict[str, int | None] = {}
    for uuid, root in roots.items():
        tree = procs.tree(root, kids) if root else {}
        total = 0
        for pid in tree:
            try:
                m = psutil.Process(pid).memory_info()
            except (psutil.Error, ValueError):
                continue
            total += max(0, m.rss - getattr(m, "shared", 0))
        out[uuid] = total if tree else None
    return out


@dataclass
class Budget:
    """What promotion may still take from memory in one pass (see :meth:`Ledger.budget`)."""

    headroom: int
    estimates: dict[str, int]
    reading: Reading
    short: tuple[str, int] | None = None  # (provider, estimate) of the row that did not fit

    def estimate(self, provider: str) -> int:
        return self.estimates.get(provider, DEFAULT_FOOTPRINT)

    def take(self, provider: str) -> bool:
        """Reserve one ``provider`` agent's estimate if the headroom covers it."""
        need = self.estimate(provider)
        if need > self.headroom:
            self.short = (provider, need)
            return False
        self.headroom -= need
        return True

    def give_back(self, provider: str) -> None:
        self.headroom += self.estimate(provider)

    def held(self) -> str | None:
        return self.reading.reason(*self.short) if self.short else None


@dataclass
class Reading:
    available: int
    total: int
    floor: int
    reserved: int = 0
    loading: list[dict] = field(default_factory=list)  # {path, provider, reserved}
    estimates: dict[str, dict] = field(default_factory=dict)  # provider -> bytes, learnt_from

    def reason(self, provider: str, need: int) -> str:
        loading = len(self.loading)
        held = f", {_size(self.reserved)} reserved for {loading} agent" if self.reserved else ""
        held += "s loading" if self.reserved and loading != 1 else " loading" if held else ""
        return (
            f"memory: {_gib(self.available)} available{held}, "
            f"concurrency.min_free_memory needs {_gib(self.floor)} and the next {provider} "
            f"agent about {_size(need)}; queued agents start when memory frees "
            "(or lower the floor, 0 turns it off)"
        )

    def as_dict(self) -> dict:
        return {
            "available": self.available,
            "total": self.total,
            "floor": self.floor,
            "reserved": self.reserved,
            "headroom": self.available - self.floor - self.reserved,
            "loading": self.loading,
            "estimates": self.estimates,
        }


class Ledger:
    """The server's view of agents' memory: footprints measured, estimates learnt,
    reservations for the agents still loading. Nothing is persisted: after a
    restart the live agents are measured again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._measured: dict[str, tuple[float, int | None]] = {}  # uuid -> (when, bytes)
        #: provider -> (median footprint, of how many agents), as last measured: kept
        #: when those agents end, since it says more than the default
        self._learnt: dict[str, tuple[int, int]] = {}

    def _footprints(self, server: ServerContext, rows: list) -> dict[str, int | None]:
        now = time.monotonic()
        with self._lock:
            stale = [a for a in rows if now - self._measured.get(a.uuid, (-1e9, None))[0] >= 1.0]
        fresh = measure(server, stale) if stale else {}
        with self._lock:
            for uuid, value in fresh.items():
                self._measured[uuid] = (now, value)
            live = {a.uuid for a in rows}
            for uuid in [u for u in self._measured if u not in live]:
                del self._measured[uuid]
            return {a.uuid: self._measured.get(a.uuid, (0, None))[1] for a in rows}

    def read(self, server: ServerContext, config: Config) -> Reading:
        """Available memory, the floor, and what the loading agents reserve."""
        from orcr_core.store.models import LIVE, Agent

        avail, total = available()
        floor = memory_floor(config.get("concurrency.min_free_memory"), total)
        reading = Reading(avail, total, floor)
        if not floor:
            return reading  # no floor: nothing to reserve against
        rows = list(
            Agent.select(
                Agent.id,
                Agent.uuid,
                Agent.path,
                Agent.provider,
                Agent.status,
                Agent.started_at,
                Agent.pane_process,
            ).where((Agent.managed == True) & Agent.status.in_(LIVE))  # noqa: E712
        )
        sizes = self._footprints(server, rows)
        now = time.time()
        loading = [
            a for a in rows if a.status == "starting" or (a.started_at or 0) > now - LOAD_SETTLE
        ]
        loaded = {a.uuid for a in rows} - {a.uuid for a in loading}
        learnt: dict[str, list[int]] = {}
        for a in rows:
            if a.uuid in loaded and sizes.get(a.uuid):
                learnt.setdefault(a.provider, []).append(sizes[a.uuid])
        with self._lock:
            for provider, got in learnt.items():
                self._learnt[provider] = (int(statistics.median(got)), len(got))
            known = dict(self._learnt)
        for provider in sorted({a.provider for a in rows} | set(known)):
            size, n = known.get(provider, (DEFAULT_FOOTPRINT, 0))
            reading.estimates[provider] = {"bytes": size, "learnt_from": n}
        for a in loading:
            est = self.estimate(reading, a.provider)
            held = max(0, est - (sizes.get(a.uuid) or 0))
            reading.reserved += held
            reading.loading.append({"path": a.path, "provider": a.provider, "reserved": held})
        reading.loading = [x for x in reading.loading if x["reserved"]]
        return reading

    @staticmethod
    def estimate(reading: Reading, provider: str) -> int:
        known = reading.estimates.get(provider)
        return known["bytes"] if known else DEFAULT_FOOTPRINT

    def budget(self, server: ServerContext, config: Config) -> Budget | None:
        """What promotion may take now, or None when the floor is off."""
        reading = self.read(server, config)
        if not reading.floor:
            return None
        return Budget(
            reading.available - reading.floor - reading.reserved,
            {p: e["bytes"] for p, e in reading.estimates.items()},
            reading,
        )
