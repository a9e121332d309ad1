"""Memory-aware admission: a promotion also needs free RAM above a floor.

A count cap alone cannot protect a machine whose agents grow: ten TUIs that
each take 3 GiB exhaust a 24 GiB box long before ``concurrency.max = 25``.
``[concurrency] min_free_memory`` is a floor on the memory psutil reports as
available; while it is not met, queued rows stay queued (FIFO order kept) and
the reason shows in ``agent get`` and ``server status``.
"""

from __future__ import annotations

from orcr_core.config import Config, memory_floor

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency; keep promotion possible
    psutil = None


def available() -> tuple[int, int]:
    """(available, total) bytes of RAM, as the kernel estimates what can be had."""
    vm = psutil.virtual_memory()
    return vm.available, vm.total


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def held_reason(config: Config, reading=available) -> str | None:
    """Why promotion must wait for memory, or None when it may go on."""
    avail, total = reading()
    floor = memory_floor(config.get("concurrency.min_free_memory"), total)
    if floor and avail < floor:
        return (
            f"memory: {_gib(avail)} available, concurrency.min_free_memory needs {_gib(floor)}; "
            "queued agents start when memory frees (or lower the floor, 0 turns it off)"
        )
    return None
