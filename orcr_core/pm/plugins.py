"""The plugin manager: built by a factory, loaded explicitly, never at import.

``ORCR_LOAD_PLUGINS`` is an allow-list of plugin names (entry-point names in the
``orcr`` group, comma separated; ``""`` loads none). ``ORCR_BLOCK_PLUGINS``
blocks names. ``ORCR_PLUGIN_MODULES`` loads extra plugins from importable
module names (a local plugin without packaging, like datasette's
``--plugins-dir``).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata

import pluggy

from orcr_core import hookspecs
from orcr_core.pm.provider_guard import DEFAULT_TIMEOUT, GuardedProvider

ENTRY_POINT_GROUP = "orcr"


class PluginError(Exception):
    """A plugin misbehaved: a duplicate name, a bad registration, a misspelt hook."""


def get_plugin_manager(load: bool = True) -> pluggy.PluginManager:
    """A fresh manager with orcr's hookspecs; with ``load`` the installed plugins too."""
    pm = pluggy.PluginManager("orcr")
    pm.add_hookspecs(hookspecs)
    if load:
        load_plugins(pm)
    if os.environ.get("ORCR_TRACE_PLUGINS"):

        def before(hook_name, methods, kwargs):
            print(f"orcr: hook {hook_name} -> {[m.plugin_name for m in methods]}", file=sys.stderr)

        pm.add_hookcall_monitoring(before, lambda *a: None)
    return pm


def _names(var: str) -> set[str] | None:
    value = os.environ.get(var)
    if value is None:
        return None
    return {n.strip() for n in value.split(",") if n.strip()}


def load_plugins(pm: pluggy.PluginManager) -> None:
    """Load entry-point plugins (narrowed by the env vars) and extra modules."""
    allow = _names("ORCR_LOAD_PLUGINS")
    for name in _names("ORCR_BLOCK_PLUGINS") or ():
        pm.set_blocked(name)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if allow is not None and ep.name not in allow:
            continue
        if pm.is_blocked(ep.name) or pm.get_plugin(ep.name) is not None:
            continue
        module = ep.load()
        pm.register(module, name=ep.name)
        dist = getattr(ep, "dist", None)
        if dist is not None:  # its METADATA is parsed only for ``orcr plugins`` (describe)
            pm._orcr_dists = getattr(pm, "_orcr_dists", {})
            pm._orcr_dists[ep.name] = dist
    for modname in _names("ORCR_PLUGIN_MODULES") or ():
        if pm.get_plugin(modname) is None:
            pm.register(importlib.import_module(modname), name=modname)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(str(exc)) from exc


@dataclass
class Registry:
    """Drivers and providers by name, with the plugin that registered each."""

    drivers: dict[str, object] = field(default_factory=dict)
    providers: dict[str, object] = field(default_factory=dict)
    sinks: dict[str, object] = field(default_factory=dict)  # notification sinks
    owners: dict[tuple[str, str], str] = field(default_factory=dict)
    #: limits the guarded providers read on every call (the server sets them from config)
    timeouts: dict[str, float] = field(default_factory=lambda: {"provider_call": DEFAULT_TIMEOUT})


def _collect(pm: pluggy.PluginManager, hook_name: str, kind: str, into: dict, reg: Registry):
    hook = getattr(pm.hook, hook_name)
    for impl in reversed(hook.get_hookimpls()):  # registration order
        plugin_name = impl.plugin_name

        def register(obj, _plugin=plugin_name):
            name = getattr(obj, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {_plugin!r} registered a {kind} with no name: {obj!r}")
            if name in into:
                other = reg.owners[(kind, name)]
                raise PluginError(
                    f"{kind} {name!r} is registered twice: by plugin {other!r} and by {_plugin!r}; "
                    f"uninstall or block one (ORCR_BLOCK_PLUGINS={_plugin})"
                )
            into[name] = obj
            reg.owners[(kind, name)] = _plugin

        impl.function(**{a: register for a in impl.argnames})


def build_registry(pm: pluggy.PluginManager) -> Registry:
    """Call the registration hooks and refuse duplicate names loudly.

    Providers come back wrapped (:mod:`orcr_core.pm.provider_guard`)."""
    reg = Registry()
    _collect(pm, "register_drivers", "driver", reg.drivers, reg)
    _collect(pm, "register_providers", "provider", reg.providers, reg)
    # each provider held to its contract: a broken one costs only its own agents
    reg.providers = {n: GuardedProvider(p, n, reg.timeouts) for n, p in reg.providers.items()}
    _collect(pm, "register_notify_sinks", "notify sink", reg.sinks, reg)
    return reg


def describe(pm: pluggy.PluginManager) -> list[dict]:
    """``orcr plugins`` rows: name, distribution, version, hooks."""
    dists = getattr(pm, "_orcr_dists", {})
    rows = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda p: p[0]):
        found = dists.get(name)
        dist, version = (found.metadata["Name"], found.version) if found else (None, None)
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or ())
        rows.append({"name": name, "distribution": dist, "version": version, "hooks": hooks})
    return rows


def register_commands(pm: pluggy.PluginManager, cli, reserved: set[str]) -> dict[str, str]:
    """Call ``register_commands(cli)`` on every plugin; return ``{command: plugin}``.

    Each implementation is called alone so every new name is attributed to its
    plugin. A name in ``reserved`` (the built-in commands, loaded or not) or one
    another plugin already added is refused loudly: click's ``add_command``
    would silently replace it.
    """
    owners: dict[str, str] = {}
    for impl in reversed(pm.hook.register_commands.get_hookimpls()):  # registration order
        before = dict(cli.commands)
        impl.function(**{a: cli for a in impl.argnames})
        for name, cmd in cli.commands.items():
            if before.get(name) is cmd:
                continue
            if name in reserved or name in before:
                if name in before:
                    cli.commands[name] = before[name]
                else:
                    del cli.commands[name]
                other = owners.get(name, "orcr (built in)")
                raise PluginError(
                    f"command {name!r} is added by plugin {impl.plugin_name!r} but already "
                    f"belongs to {other!r}; uninstall or block one "
                    f"(ORCR_BLOCK_PLUGINS={impl.plugin_name})"
                )
            owners[name] = impl.plugin_name
    return owners
