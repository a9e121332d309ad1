"""Configuration: one TOML file, defaults, validation, comment-keeping edits.

Keys are dotted (``concurrency.max``). Every known key has a validator; a
section listed in ``OPEN_SECTIONS`` accepts any ``[a-z0-9_]+`` key (any
provider name is a valid ``[concurrency]`` key). A bad value is refused with the
key, the value and what is allowed, before anything is written.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orcr_core import dirs, paths
from orcr_core.config.values import (  # noqa: F401 (the config API: re-exported)
    CALENDAR_WINDOWS,
    GLOBAL_CONCURRENCY_KEYS,
    MAX_BUDGET,
    MAX_CAP,
    MAX_RETENTION,
    MEMORY_HELP,
    NAME,
    PRICE_FIELDS,
    ConfigError,
    _argv,
    _bool,
    _duration_or_off,
    _duration_range,
    _int_range,
    _limit,
    _memory,
    _name,
    _net_list,
    _nonempty,
    _path_list,
    _pressure,
    _prices,
    _rule,
    _str_list,
    _string,
    _window,
    join_key,
    memory_floor,
    off,
    parse_duration,
    split_key,
)

DEFAULTS: dict[str, dict[str, Any]] = {
    "concurrency": {"max": 25, "min_free_memory": "auto", "max_memory_pressure": 40},
    # ceilings per agent and for the fleet (orcr_core/ceilings, docs/ceilings.md)
    "limits": {
        "mechanism": "auto",
        "memory_max": "50%",
        "memory_high": "auto",
        "pids_max": 4096,
        "cpu_weight": 50,
        "fleet_memory_max": "85%",
    },
    "timings": {
        "max_starting": "2m",
        "dialog_wait": "1h",
        "reconcile_every": "30s",
        "gc_after": "24h",
        "stop_grace": "10s",
        "prompt_confirm": "3s",
        "poll_every": "250ms",
        "park_after": "30m",
        "stall_after": "10m",
        "blocked_after": "5s",
        "provider_call": "30s",
    },
    "events": {"retention": 100_000, "resume_grace": "30s"},
    # ended rows of agents seen in the user's other herdr sessions (agents/unmanaged.py)
    "unmanaged": {"keep_ended": 1000},
    # off by default: a resumed agent picks its work up again unattended (docs/configuration.md)
    "recovery": {"resume_lost": False},
    "loops": {
        "log_max_bytes": 10 * 1024 * 1024,
        "keep_runs": 50,
        "missed_after": "1m",
        "keep_events": 10_000,
    },
    # rm: every agent run ends (done) with its first turn, as agent run --rm
    "agent": {"provider": "claude", "rm": False},
    "driver": {"name": "auto"},
    # "" = this instance's own: ``orcr``, or ``orcr-<instance id>`` under ORCR_HOME
    "herdr": {"session": "", "binary": "herdr", "socket": ""},
    "tmux": {"socket": "", "binary": "tmux"},
    # notifications (orcr_core/notify, docs/notifications.md); rules and sinks are tables
    "notify": {"window": "1m", "burst": 3, "gather": "2s", "retry_for": "1h"},
    # "" = <data dir>/worktrees: agents' own checkouts (orcr_core/workspaces)
    "worktrees": {"dir": ""},
}


def _sink_option(key: str, value: Any) -> Any:
    """``notify.<sink>.<option>``: checked by the sink's plugin when the server loads it
    (``orcr notify ls`` shows a sink a bad option left off, and why)."""
    if key.split(".")[1] in DEFAULTS["notify"] or key.split(".")[1] == "rules":
        raise ConfigError(f"{key} is not a key; notify.{key.split('.')[1]} is")
    return value


_sink_option.allowed = "any value the sink takes"  # type: ignore[attr-defined]


def allowed(key: str) -> str:
    """What a key allows, as docs/configuration.md says it (tests/test_docs.py checks)."""
    return _validator(key).allowed  # type: ignore[attr-defined]


#: Every key and its check. The ranges are documented in docs/configuration.md.
VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "concurrency.min_free_memory": _memory,
    "concurrency.max_memory_pressure": _pressure,
    "concurrency.*": _int_range(1, MAX_CAP),
    "limits.mechanism": _limit,
    "limits.fleet_memory_max": _limit,
    "limits.memory_max": _limit,
    "limits.memory_high": _limit,
    "limits.pids_max": _limit,
    "limits.cpu_weight": _limit,
    "limits.*.memory_max": _limit,
    "limits.*.memory_high": _limit,
    "limits.*.pids_max": _limit,
    "limits.*.cpu_weight": _limit,
    "timings.max_starting": _duration_range(1, 86400),
    "timings.dialog_wait": _duration_range(1, 7 * 86400),
    "timings.reconcile_every": _duration_range(0.1, 3600),
    "timings.gc_after": _duration_range(1, 365 * 86400),
    "timings.stop_grace": _duration_range(0, 3600),
    "timings.prompt_confirm": _duration_range(0.1, 60),
    "timings.poll_every": _duration_range(0.01, 3600),
    "timings.provider_call": _duration_range(0.1, 3600),
    "timings.park_after": _duration_or_off(0.1, 30 * 86400),
    "timings.stall_after": _duration_or_off(1, 30 * 86400),
    "timings.blocked_after": _duration_range(0.5, 3600),
    "events.retention": _int_range(1, MAX_RETENTION),
    "events.resume_grace": _duration_range(0, 3600),
    "unmanaged.keep_ended": _int_range(0, 1_000_000),
    "recovery.resume_lost": _bool,
    "loops.log_max_bytes": _int_range(1000, 2**30),
    "loops.keep_runs": _int_range(1, MAX_CAP),
    "loops.missed_after": _duration_range(1, 86400),
    "loops.keep_events": _int_range(100, MAX_RETENTION),
    "driver.name": _name,
    "agent.provider": _name,
    "agent.rm": _bool,
    "herdr.session": _string,
    "herdr.binary": _nonempty,
    "herdr.socket": _string,
    "tmux.socket": _string,
    "tmux.binary": _nonempty,
    "notify.window": _duration_range(1, 86400),
    "notify.burst": _int_range(1, 10_000),
    "notify.gather": _duration_range(0, 600),
    "notify.retry_for": _duration_range(1, 7 * 86400),
    "notify.rules.*.enabled": _rule(_bool),
    "notify.rules.*.match": _rule(_str_list),
    "notify.rules.*.longer_than": _rule(_duration_or_off(1, 30 * 86400)),
    "notify.*.*": _sink_option,
    "worktrees.dir": _string,
    "usage.prices": _prices,
    "budget.*.tokens": _int_range(0, MAX_BUDGET),
    "budget.*.per": _window,
    # the sandbox (orcr_core/sandbox, docs/sandbox.md); [sandbox.<provider>] adds to it
    "sandbox.default": _bool,
    "sandbox.bwrap": _nonempty,
    "sandbox.allow_read": _path_list,
    "sandbox.allow_write": _path_list,
    "sandbox.deny_read": _path_list,
    "sandbox.allow_net": _net_list,
    "sandbox.pass_env": _str_list,
    "sandbox.*.default": _bool,
    "sandbox.*.allow_read": _path_list,
    "sandbox.*.allow_write": _path_list,
    "sandbox.*.deny_read": _path_list,
    "sandbox.*.allow_net": _net_list,
    "sandbox.*.pass_env": _str_list,
    "providers.*.argv": _argv,
    "providers.*.model": _string,
    "providers.*.extra_args": _str_list,
    "providers.*.allow_unpinned": _bool,
    "providers.*.home": _string,
    "providers.*.stop_hook": _bool,
    "providers.*.notify": _bool,
    "providers.*.trust_cwd": _bool,
    "providers.*.autoupdate": _bool,
    "providers.*.hold_on_limit": _bool,
    "providers.*.config": _string,
    "providers.*.settings_dir": _string,
}


def _closest(key: str) -> str | None:
    """The known key nearest to an unknown one (``*`` filled from the key itself)."""
    import difflib

    parts = _parts(key)
    candidates = []
    for pattern in VALIDATORS:
        pparts = pattern.split(".")
        filled = [
            (parts[i] if i < len(parts) and NAME.fullmatch(parts[i]) else "<name>")
            if p == "*"
            else p
            for i, p in enumerate(pparts)
        ]
        candidates.append(".".join(filled))
    found = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    return found[0] if found else None


def _parts(key: str) -> list[str]:
    try:
        return split_key(key)
    except ConfigError:
        return key.split(".")


#: a key's parts, for :meth:`Config.get`: the same few keys are read on every
#: admission, and parsing one (a regex per part) cost more than the lookup
_GET_PARTS: dict[str, tuple[str, ...]] = {}


def _get_parts(key: str) -> tuple[str, ...]:
    parts = _GET_PARTS.get(key)
    if parts is None:
        parts = tuple(_parts(key))
        if len(_GET_PARTS) < 4096:  # keys name providers and paths: keep it bounded
            _GET_PARTS[key] = parts
    return parts


def _part_ok(pparts: list[str], i: int, k: str) -> bool:
    """Whether key part ``k`` fits pattern part ``i``: ``*`` is a name, and a budget's
    scope (``budget.<scope>``) may also be a path prefix such as ``nightly/review``."""
    p = pparts[i]
    if p != "*":
        return p == k
    if NAME.fullmatch(k):
        return True
    if pparts[0] == "budget" and i == 1:
        try:
            paths.validate(k)
        except paths.PathError:
            return False
        return True
    return False


def _validator(key: str) -> Callable[[str, Any], Any]:
    if key in VALIDATORS:
        return VALIDATORS[key]
    parts = _parts(key)
    for pattern, fn in VALIDATORS.items():
        pparts = pattern.split(".")
        if len(pparts) == len(parts) and all(_part_ok(pparts, i, k) for i, k in enumerate(parts)):
            return fn
    if len(parts) == 3 and parts[0] == "budget" and parts[2] in ("tokens", "per"):
        raise ConfigError(
            f"{key}: {parts[1]!r} is not a budget scope; use all, a provider name or an "
            "agent path prefix (segments of a-z, 0-9 and _ joined by /, quoted when it has "
            'a /: budget."nightly/review".tokens)'
        )
    near = _closest(key)
    hint = f"did you mean {near}? " if near else ""
    raise ConfigError(
        f"unknown config key {key!r}; {hint}every key and its range: docs/configuration.md "
        "(orcr config get prints the effective values)"
    )


def check_key(key: str, tables: bool = False) -> None:
    """Refuse an unknown key (with the closest known one); with ``tables``, a
    table of known keys (``timings``, ``providers.claude``) is known too."""
    if tables:
        parts = _parts(key)
        for pattern in VALIDATORS:
            pparts = pattern.split(".")[: len(parts)]
            if len(pparts) == len(parts) and len(parts) < len(pattern.split(".")):
                if all(_part_ok(pparts, i, k) for i, k in enumerate(parts)):
                    return
    _validator(key)


def _flatten(doc: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in doc.items():
        key = f"{prefix}{join_key([k])}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def validate(doc: dict) -> None:
    """Check every key of a whole document; raise ConfigError on the first bad one."""
    for key, value in _flatten(doc).items():
        _validator(key)(key, value)


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _plain(obj: Any) -> Any:
    """tomlkit containers to plain dicts/lists."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if hasattr(obj, "unwrap"):
        return obj.unwrap()
    return obj


@dataclass
class Config:
    """The effective configuration: defaults merged with the user's file."""

    data: dict
    path: Path

    def get(self, key: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in _get_parts(key):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def section(self, name: str) -> dict:
        return dict(self.data.get(name, {}))

    def duration(self, key: str) -> float:
        value = self.get(key)
        return 0.0 if off(value) else parse_duration(value, key)

    def cap(self, provider: str | None = None) -> int | None:
        """The global cap, or a provider's cap (None when it has none)."""
        if provider is None:
            return int(self.get("concurrency.max"))
        if provider in GLOBAL_CONCURRENCY_KEYS:
            return None
        value = self.get(f"concurrency.{provider}")
        return int(value) if value is not None else None

    def provider_caps(self) -> dict[str, int]:
        """Every provider's own cap: the ``[concurrency]`` keys that name a provider."""
        caps = self.section("concurrency")
        return {k: int(v) for k, v in caps.items() if k not in GLOBAL_CONCURRENCY_KEYS}

    def budgets(self) -> dict[str, dict]:
        """``{scope: {"tokens": int, "per": window}}`` for each ``[budget.<scope>]``
        that sets ``tokens`` (``per`` defaults to ``day``)."""
        out = {}
        for scope, table in (self.get("budget") or {}).items():
            if isinstance(table, dict) and table.get("tokens") is not None:
                out[scope] = {"tokens": int(table["tokens"]), "per": table.get("per", "day")}
        return out

    def provider_options(self, name: str) -> dict:
        return dict(self.get(f"providers.{name}", {}) or {})

    @property
    def data_dir(self) -> Path:
        return dirs.data_dir()

    @property
    def instance_id(self) -> str:
        """This instance's id, marked on its panes (see :func:`orcr_core.dirs.instance_id`)."""
        return dirs.instance_id()


def load(path: Path | None = None) -> Config:
    """Read and validate the config file (a missing file means all defaults)."""
    path = path or dirs.config_path()
    user: dict = {}
    if path.exists():
        user = _parse_plain(path, _read(path))
        validate(user)
    return Config(_merge(DEFAULTS, user), path)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _parse_plain(path: Path, text: str) -> dict:
    """The file as plain dicts, through the standard library's ``tomllib``: reading
    needs no tomlkit, whose import and parse cost every server start ~10 ms. Its
    error is what ``config get`` and ``config set`` both say."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _parse_file(path: Path):
    """The file as a tomlkit document, for ``config set``/``unset`` to edit in place;
    a file that is not TOML (or cannot be read) is a ConfigError naming it, never a
    traceback."""
    import tomlkit

    text = _read(path)
    _parse_plain(path, text)  # the same error as a load's
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit raises its own ParseError family
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
