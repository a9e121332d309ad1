"""Ceilings: every agent in its own memory, process and CPU limits, the fleet in one.

Admission decides who starts; ceilings bound what each agent and all of them
may take once started. A :class:`Backend` is one mechanism that enforces them,
all behind the one interface and tested by one suite
(``tests/test_ceilings_backends.py``):

* :mod:`~orcr_core.ceilings.v2`: cgroup v2, a delegated subtree (tested only
  against :mod:`~orcr_core.ceilings.mimic`, never on a real kernel);
* :mod:`~orcr_core.ceilings.systemd`: systemd user scopes (tested only against a
  fake ``systemd-run``/``systemctl``);
* :mod:`~orcr_core.ceilings.v1`: cgroup v1 with the memory, pids and cpu
  controllers mounted writable (what these machines have, as root): the one
  tested on a real kernel.

The server detects the mechanism at start (:func:`detect`, in that order:
:mod:`~orcr_core.ceilings.detect`) and installs it
(:func:`install`); admission, the spawn pipeline and the end of an agent read it
through :func:`current`. The launch step (:mod:`orcr_core.ceilings.join`) puts
the agent's process in its group before it runs anything.

This package never imports peewee or pluggy.
"""

from __future__ import annotations

import os
from collections.abc import Container
from dataclasses import asdict, dataclass
from typing import Any, Protocol

MiB = 2**20
GiB = 2**30

#: per-agent keys, in ``[limits]``, ``[limits.<provider>]`` and per run
AGENT_KEYS = ("memory_max", "memory_high", "pids_max", "cpu_weight")
#: ``limits.mechanism`` values; the others are named so they are refused clearly
MECHANISMS = ("auto", "cgroup_v2", "systemd", "cgroup_v1", "none")
PIDS_RANGE = (8, 4_194_304)
WEIGHT_RANGE = (1, 10_000)  # systemd's CPUWeight scale; 100 is a normal process
SIZE_HELP = "use a size (512MiB, 2GiB), a share of RAM (25%) or off"


class LimitsError(ValueError):
    """A ceiling value that is not allowed; the message names the key and what is."""

    code = "invalid_limits"


@dataclass(frozen=True)
class Limits:
    """One agent's effective ceilings (bytes, count, weight); None = no ceiling."""

    memory_max: int | None = None
    memory_high: int | None = None
    pids_max: int | None = None
    cpu_weight: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def size(value: Any, total: int, key: str) -> int | None:
    """A size (``512MiB``), a share of RAM (``25%``) or off (None)."""
    from orcr_core.common.sizes import SIZE as _SIZE
    from orcr_core.common.sizes import SIZE_UNITS as _SIZE_UNITS

    if value is None or value in ("off", 0, "0"):
        return None
    if isinstance(value, bool):
        raise LimitsError(f"{key} = {value!r} is not allowed; {SIZE_HELP}")
    if isinstance(value, int) and value > 0:
        out = value
    else:
        text = str(value).strip()
        parsed: int | None = None
        if text.endswith("%"):
            try:
                share = float(text[:-1])
            except ValueError:
                share = -1.0
            if 0 < share <= 100:
                parsed = int(total * share / 100)
        elif m := _SIZE.fullmatch(text):
            parsed = int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
        if parsed is None:
            raise LimitsError(f"{key} = {value!r} is not allowed; {SIZE_HELP}")
        out = parsed
    if out < 4 * MiB:
        raise LimitsError(f"{key} = {value!r} is below 4MiB, too small for any program")
    return out


def count(value: Any, key: str, lo: int, hi: int) -> int | None:
    if value is None or value == "off":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise LimitsError(
            f"{key} = {value!r} is not allowed; use a whole number from {lo:,} to {hi:,} or off"
        )
    return value


def check_value(key: str, value: Any, last: str | None = None) -> Any:
    """Config validator for ``limits.*`` keys (``last``, else the key's last part,
    names which ceiling it is)."""
    last = last or key.rsplit(".", 1)[-1]
    if last in ("memory_max", "fleet_memory_max"):
        size(value, 2**40, key)
    elif last == "memory_high":
        if value != "auto":
            size(value, 2**40, key)
    elif last == "pids_max":
        count(value, key, *PIDS_RANGE)
    elif last == "cpu_weight":
        count(value, key, *WEIGHT_RANGE)
    elif last == "mechanism":
        if value not in MECHANISMS:
            raise LimitsError(f"{key} = {value!r} is not allowed; use one of {MECHANISMS}")
    return value


def check_run(limits: Any) -> dict:
    """Per-run ceilings (``agent run --memory-max ...``, the SDK's ``limits``):
    a dict of :data:`AGENT_KEYS`; refused with the key and what is allowed."""
    if limits is None:
        return {}
    if not isinstance(limits, dict):
        raise LimitsError(f"limits must be a table of {', '.join(AGENT_KEYS)}")
    for key, value in limits.items():
        if key not in AGENT_KEYS:
            raise LimitsError(f"unknown ceiling {key!r}; the ceilings are {', '.join(AGENT_KEYS)}")
        check_value(f"--{key.replace('_', '-')}", value, key)
    return {k: v for k, v in limits.items() if v is not None}


def resolve(config, provider: str, run: dict | None, total: int) -> Limits:
    """The effective ceilings: per run over ``[limits.<provider>]`` over ``[limits]``.

    ``memory_high`` ``auto`` is 90% of ``memory_max`` (the kernel reclaims and
    throttles there before it kills); a ``memory_high`` at or above the max is dropped."""
    merged: dict[str, Any] = {}
    for source in (config.get("limits") or {}, config.get(f"limits.{provider}") or {}, run or {}):
        for key in AGENT_KEYS:
            if key in source and not isinstance(source[key], dict):
                merged[key] = source[key]
    mem = size(merged.get("memory_max"), total, "memory_max")
    high_raw = merged.get("memory_high", "auto")
    high = (int(mem * 0.9) if mem else None) if high_raw == "auto" else size(high_raw, total, "x")
    if high is not None and mem is not None and high >= mem:
        high = None
    return Limits(
        memory_max=mem,
        memory_high=high,
        pids_max=count(merged.get("pids_max"), "pids_max", *PIDS_RANGE),
        cpu_weight=count(merged.get("cpu_weight"), "cpu_weight", *WEIGHT_RANGE),
    )


def asks(config, provider: str, run: dict | None) -> list[str]:
    """The ceilings this run asks for beyond the global default: per run or per
    provider. These are refused (``limits_unavailable``) where no mechanism holds."""
    own = dict(config.get(f"limits.{provider}") or {})
    own.update(run or {})
    return sorted(k for k in AGENT_KEYS if own.get(k) not in (None, "off"))


class Backend(Protocol):
    """One mechanism that enforces ceilings. ``uuid`` names an agent's group."""

    name: str

    def ensure_fleet(self, fleet_max: int | None) -> None: ...
    def create(self, uuid: str, limits: Limits) -> None: ...
    def launch_prefix(self, uuid: str) -> list[str]: ...
    def usage(self, uuid: str) -> dict | None: ...
    def refused(self, uuid: str) -> int | None: ...
    def oom(self, uuid: str) -> dict | None: ...
    def remove(self, uuid: str) -> bool: ...
    def sweep(self, live: Container[str]) -> list[str]: ...
    def fleet_usage(self) -> dict: ...


@dataclass
class Detected:
    """What :func:`detect` found: a backend, or none and why (for doctor, status)."""

    backend: Backend | None
    mechanism: str
    reason: str

    def as_dict(self) -> dict:
        from orcr_core.ceilings.detection import TESTED

        return {
            "mechanism": self.mechanism,
            "reason": self.reason,
            "tested": TESTED.get(self.mechanism),  # real kernel, or a mimic/fake only
        }


_current: Detected = Detected(None, "none", "not detected yet (no server in this process)")


def install(found: Detected) -> None:
    global _current
    _current = found


def current() -> Detected:
    return _current


def detect(config, instance: str) -> Detected:
    """The mechanism this server can use, by ``limits.mechanism`` (auto: cgroup v2
    delegated, then systemd user scopes, then cgroup v1, then none)."""
    from orcr_core.ceilings.detection import detect as _detect

    return _detect(config, instance)


def human(n: int | None) -> str:
    if n is None:
        return "none"
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


def ram_total() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
