"""``agent.view.set|clear`` and ``workspace.view.set|clear`` (see :mod:`handlers`).

herdr's socket docs ("Agent view queries", "Workspace view presentation",
0.9/socket-api.mdx) and the protocol-22 schema (``AgentViewSetParams``,
``WorkspaceViewSetParams``, results ``agent_view`` / ``workspace_view``): each
installs one transient presentation, for herdr's own UI only (the Agents sidebar,
the workspace chrome). ``agent.list``, ``workspace.list`` and events stay
unfiltered, so the emulator keeps the view (``emu.agent_view`` /
``emu.workspace_view``) and reports it, and nothing else changes. A set replaces
the previous view; a clear with a ``source`` that does not own it leaves it; the
view is not saved (it lasts until the server exits). A ``plugin:`` source names a
plugin, and herdr refuses sets for a plugin that is missing or disabled: the
emulator has no plugins, so every such set is refused ``plugin_not_found``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orcr_testing.herdr.transport import ApiError

if TYPE_CHECKING:
    from orcr_testing.herdr.emulator import Emulator

FIELDS = ("status", "workspace_id", "tab_id", "pane_id", "agent", "seen", "state_change_seq")
SORT_FIELDS = (
    "workspace_order",
    "tab_order",
    "pane_order",
    "attention",
    "status",
    "agent",
    "seen",
    "state_change_seq",
)
#: a context value may only be compared to its own id field
CONTEXTS = {"current_workspace_id": "workspace_id", "current_tab_id": "tab_id"}


def _bad(why: str) -> ApiError:
    return ApiError("invalid_agent_view", f"invalid agent view: {why}")


def _field(field: Any, allowed: tuple[str, ...]) -> None:
    if isinstance(field, str) and field in allowed:
        return
    if isinstance(field, dict) and isinstance(field.get("token"), str):
        return
    raise _bad(f"field {field!r} is none of {', '.join(allowed)} or {{'token': name}}")


def _value(field: Any, value: Any) -> None:
    if isinstance(value, dict):
        context = value.get("context")
        if context not in CONTEXTS:
            raise _bad(f"context {context!r} is none of {', '.join(CONTEXTS)}")
        if field != CONTEXTS[context]:
            raise _bad(f"context {context} may only be compared to {CONTEXTS[context]}")
    elif isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise _bad(f"value {value} is negative (unsigned numbers only)")
    elif not isinstance(value, (str, bool)):
        raise _bad(f"value {value!r} is not a string, boolean, number or context")


def check_filter(node: Any) -> None:
    """A filter tree as herdr takes it: ``all``/``any`` (``filters``), ``not``
    (``filter``), ``eq`` (``field``, ``value``), ``in`` (``field``, ``values``),
    ``exists`` (``field``)."""
    if not isinstance(node, dict):
        raise _bad(f"filter {node!r} is not an object")
    op = node.get("op")
    if op in ("all", "any"):
        filters = node.get("filters")
        if not isinstance(filters, list):
            raise _bad(f"{op} needs a filters list")
        for child in filters:
            check_filter(child)
    elif op == "not":
        check_filter(node.get("filter"))
    elif op in ("eq", "in", "exists"):
        _field(node.get("field"), FIELDS)
        if op == "eq":
            if "value" not in node:
                raise _bad("eq needs a value")
            _value(node["field"], node["value"])
        elif op == "in":
            if not isinstance(node.get("values"), list):
                raise _bad("in needs a values list")
            for value in node["values"]:
                _value(node["field"], value)
    else:
        raise _bad(f"op {op!r} is none of all, any, not, eq, in, exists")


def _source(params: dict) -> str:
    source = params.get("source")
    if not isinstance(source, str):
        raise ApiError("invalid_params", "source must be a string")
    if source.startswith("plugin:"):
        plugin = source.removeprefix("plugin:")
        raise ApiError("plugin_not_found", f"plugin {plugin} not found")
    return source


def _reply(kind: str, view: dict | None) -> dict:
    if view is None:
        return {"type": kind, "active": False, "source": None, "label": None}
    return {"type": kind, "active": True, "source": view["source"], "label": view["label"]}


def _clear(emu: Emulator, attr: str, params: dict) -> dict | None:
    view = getattr(emu, attr, None)
    wanted = params.get("source")
    if view is not None and (wanted is None or wanted == view["source"]):
        view = None
        setattr(emu, attr, None)
    return view


def agent_view_set(emu: Emulator, params: dict, rid: str) -> dict:
    source = _source(params)
    if params.get("filter") is not None:
        check_filter(params["filter"])
    sort = params.get("sort") or []
    if not isinstance(sort, list):
        raise _bad("sort must be a list")
    for key in sort:
        if not isinstance(key, dict):
            raise _bad(f"sort key {key!r} is not an object")
        _field(key.get("field"), SORT_FIELDS)
        if key.get("order", "asc") not in ("asc", "desc"):
            raise _bad(f"order {key.get('order')!r} is neither asc nor desc")
    view = {
        "source": source,
        "label": params.get("label"),
        "filter": params.get("filter"),
        "sort": sort,
    }
    emu.agent_view = view
    return _reply("agent_view", view)


def agent_view_clear(emu: Emulator, params: dict, rid: str) -> dict:
    return _reply("agent_view", _clear(emu, "agent_view", params))


def workspace_view_set(emu: Emulator, params: dict, rid: str) -> dict:
    source = _source(params)
    ids = params.get("workspace_ids") or []
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ApiError("invalid_params", "workspace_ids must be a list of workspace ids")
    view = {"source": source, "label": params.get("label"), "workspace_ids": list(ids)}
    emu.workspace_view = view
    return _reply("workspace_view", view)


def workspace_view_clear(emu: Emulator, params: dict, rid: str) -> dict:
    return _reply("workspace_view", _clear(emu, "workspace_view", params))


VIEW_HANDLERS = {
    "agent.view.set": agent_view_set,
    "agent.view.clear": agent_view_clear,
    "workspace.view.set": workspace_view_set,
    "workspace.view.clear": workspace_view_clear,
}
