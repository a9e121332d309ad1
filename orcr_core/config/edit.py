"""Editing the configuration file: ``orcr config set`` and ``unset``.

One key at a time with tomlkit (the file's comments stay), the whole file
validated before it is written atomically. ``config set`` also checks what only
the machine can tell: a driver or provider name must be installed, a provider's
cap (``concurrency.<name>``) must name an installed provider unless ``force``
says it is a third-party one not installed yet, and ``tmux.socket`` must be in
a directory that exists.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from orcr_core import dirs
from orcr_core.config import (
    GLOBAL_CONCURRENCY_KEYS,
    ConfigError,
    _parse_file,
    _plain,
    _validator,
    check_key,
    split_key,
    validate,
)


def coerce(text: str) -> Any:
    """A value typed on the command line: TOML literal if it parses, else a string."""
    import tomlkit

    try:
        return _plain(tomlkit.parse(f"v = {text}")["v"])
    except Exception:
        return text


#: keys that decide which multiplexer server (and session) orcr drives: changing
#: one while agents are live would orphan them (docs/decisions.md)
MUX_KEYS = ("driver.name", "tmux.socket", "herdr.session", "herdr.socket")
#: keys whose value must name something installed: checked by ``config set``
#: only (it loads the plugins; the server and ``config get`` do not)
INSTALLED_KEYS = {"driver.name": "drivers", "agent.provider": "providers"}


def check_installed(key: str, value: Any) -> None:
    """Refuse a driver or provider name no installed plugin registers (loads plugins)."""
    kind = INSTALLED_KEYS.get(key)
    if kind is None:
        return
    from orcr_core.pm.plugins import build_registry, get_plugin_manager

    names = sorted(getattr(build_registry(get_plugin_manager()), kind))
    allowed = (["auto"] if kind == "drivers" else []) + names
    if value not in allowed:
        import difflib

        near = difflib.get_close_matches(str(value), allowed, n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        raise ConfigError(
            f"{key} = {value!r} is not installed; use one of: {', '.join(allowed) or 'none'}"
            f"{hint} (orcr plugins lists what is installed)"
        )


def _installed_providers() -> list[str]:
    from orcr_core.pm.plugins import build_registry, get_plugin_manager

    return sorted(build_registry(get_plugin_manager()).providers)


def check_provider_cap(key: str, force: bool = False) -> None:
    """``concurrency.<name>`` is a provider's cap: refuse a name no installed
    provider has (a typo such as ``concurrency.mx`` would be a cap nobody reads)
    unless ``force`` says it is a third-party provider to be installed later."""
    parts = key.split(".")
    if len(parts) != 2 or parts[0] != "concurrency" or parts[1] in GLOBAL_CONCURRENCY_KEYS:
        return
    installed = _installed_providers()
    if force or parts[1] in installed:
        return
    import difflib

    near = difflib.get_close_matches(parts[1], [*GLOBAL_CONCURRENCY_KEYS, *installed], n=1)
    hint = f"did you mean concurrency.{near[0]}? " if near else ""
    raise ConfigError(
        f"{key}: {parts[1]!r} is not an installed provider, so this cap would limit nothing; "
        f"{hint}[concurrency] takes max, min_free_memory and a cap per installed provider "
        f"({', '.join(installed) or 'none'}); for a third-party provider you will install "
        "later, add --force. Nothing was written."
    )


def check_socket_dir(key: str, value: Any) -> None:
    """``tmux.socket`` must lie in a directory that exists (tmux does not make it):
    otherwise every agent would fail to start."""
    if key != "tmux.socket" or not isinstance(value, str) or "/" not in value:
        return  # empty or a name (tmux -L): tmux keeps it in its own directory
    parent = Path(os.path.expanduser(str(value))).parent
    if not parent.is_dir():
        raise ConfigError(
            f"tmux.socket = {value!r}: the directory {parent} does not exist, and tmux "
            f"does not create it; make it first (mkdir -p {parent}) or pick another path "
            "(empty: orcr's own socket). Nothing was written."
        )


def set_value(key: str, raw: str, path: Path | None = None, force: bool = False) -> Any:
    """Edit one key with tomlkit, keep comments, validate the whole file, write atomically."""
    import tomlkit

    path = path or dirs.config_path()
    value = coerce(raw)
    _validator(key)(key, value)
    check_installed(key, value)
    check_provider_cap(key, force)
    check_socket_dir(key, value)
    doc = _parse_file(path) if path.exists() else tomlkit.document()
    parts = split_key(key)
    node = doc
    for part in parts[:-1]:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"{key}: {part!r} is a value, not a table")
    node[parts[-1]] = value
    _write(doc, path)
    return value


def unset_value(key: str, path: Path | None = None) -> Any:
    """Remove ``key`` from the file (its default applies again); the old value,
    or None when the file did not set it (nothing is written then)."""
    path = path or dirs.config_path()
    check_key(key, tables=True)
    if not path.exists():
        return None
    doc = _parse_file(path)
    parts, node = split_key(key), doc
    chain = []  # (table, key in it) down to the value
    for part in parts[:-1]:
        chain.append((node, part))
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    if not isinstance(node, dict) or parts[-1] not in node:
        return None
    old = _plain(node[parts[-1]])
    del node[parts[-1]]
    # a table this emptied goes too (no bare [providers.echo] left behind)
    for parent, part in reversed(chain):
        if len(parent[part]) > 0:
            break
        del parent[part]
    _write(doc, path)
    return old


def _write(doc, path: Path) -> None:
    import tomlkit

    validate(_plain(doc))
    try:
        dirs.require_writable(path.parent)
    except dirs.Unwritable as exc:
        raise ConfigError(str(exc)) from None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(tomlkit.dumps(doc))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise ConfigError(dirs.unwritable(path.parent, exc)) from None
