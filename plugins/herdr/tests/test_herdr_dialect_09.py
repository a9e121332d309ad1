"""The protocol-22 dialect's method set, derived from the vendored 0.9 schema, and the
``agent.view.*`` / ``workspace.view.*`` methods the emulator serves (issue 33 item 13:
the dialect had refused ``agent.view.set|clear``, in herdr since 0.7.5)."""

from __future__ import annotations

import json

import pytest
from orcr_testing.herdr.dialect import HERDR_09
from orcr_testing.herdr.schema import VENDORED, VENDORED_09
from orcr_testing.herdr.wire import call, ok


def _methods(path) -> set[str]:
    doc = json.loads(path.read_text())
    return {b["properties"]["method"]["const"] for b in doc["schemas"]["request"]["oneOf"]}


SCHEMA_09 = _methods(VENDORED_09)


def test_the_removed_set_is_what_the_09_schema_dropped_from_08():
    """Method by method: ``removed`` holds exactly the 0.8 methods the 0.9 schema lacks,
    and none it has. Planted: agent.view.set back in ``removed`` -> fails."""
    assert HERDR_09.removed == _methods(VENDORED) - SCHEMA_09
    assert HERDR_09.removed and not HERDR_09.removed & SCHEMA_09


def test_every_method_of_the_09_schema_is_accepted_on_22(make_emulator):
    """Each schema method, sent with empty params, gets anything but ``unknown_method``
    (a result, ``invalid_request`` for missing params, or ``not_implemented`` for what the
    emulator does not model); each removed one gets ``unknown_method``.
    Planted: agent.view.set back in ``removed`` -> fails."""
    emu = make_emulator(protocol=22)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    refused = []
    for method in sorted(SCHEMA_09 - {"server.stop"}) + ["server.stop"]:  # stop: the last
        reply = call(emu, method, {}, rid=f"r-{method}")
        if reply.get("error", {}).get("code") == "unknown_method":
            refused.append(method)
    assert refused == []
    emu.stop_requested.wait(5)
    emu = make_emulator(protocol=22)
    for method in sorted(HERDR_09.removed):
        assert call(emu, method, {})["error"]["code"] == "unknown_method", method


AGENT_VIEW = {
    "source": "orcr-test",
    "label": "focus",
    "filter": {
        "op": "any",
        "filters": [
            {"op": "eq", "field": "workspace_id", "value": {"context": "current_workspace_id"}},
            {"op": "in", "field": "status", "values": ["blocked", "done"]},
            {"op": "not", "filter": {"op": "exists", "field": {"token": "orcr"}}},
        ],
    },
    "sort": [{"field": "attention", "order": "desc"}, {"field": "state_change_seq"}],
}


@pytest.mark.parametrize("protocol", [20, 22])
def test_agent_view_set_and_clear(make_emulator, protocol):
    """0.9/socket-api.mdx "Agent view queries" (and 0.8's docs, where it is too): a set
    replaces the view and reports it; ``agent.list`` is unfiltered; a clear naming
    another source leaves the view; a clear naming its owner, or none, ends it; the
    view does not outlive the server. Every reply is valid against the schema.
    Planted: clear ignoring ``source`` -> fails."""
    emu = make_emulator(protocol=protocol)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    before = ok(emu, "agent.list")
    got = ok(emu, "agent.view.set", AGENT_VIEW)
    assert got == {"type": "agent_view", "active": True, "source": "orcr-test", "label": "focus"}
    assert ok(emu, "agent.list") == before
    other = {**AGENT_VIEW, "source": "other", "label": None}
    assert ok(emu, "agent.view.set", other)["source"] == "other"  # replaced
    assert ok(emu, "agent.view.clear", {"source": "orcr-test"})["active"] is True
    assert ok(emu, "agent.view.clear", {"source": "other"}) == {
        "type": "agent_view",
        "active": False,
        "source": None,
        "label": None,
    }
    ok(emu, "agent.view.set", AGENT_VIEW)
    assert ok(emu, "agent.view.clear")["active"] is False  # unconditional
    ok(emu, "agent.view.set", AGENT_VIEW)
    emu.stop()
    emu.start()
    assert emu.agent_view is None
    assert [(v.kind, v.errors) for v in emu.violations] == []


@pytest.mark.parametrize(
    "params, code",
    [
        ({**AGENT_VIEW, "source": "plugin:example.agent-views"}, "plugin_not_found"),
        (
            {"source": "t", "filter": {"op": "eq", "field": "tab_id",
                                       "value": {"context": "current_workspace_id"}}},
            "invalid_agent_view",
        ),
    ],
)  # fmt: skip
def test_agent_view_set_refusals(emulator09, params, code):
    """A plugin source with no such plugin, and a context compared to another id field
    (the docs: "may only be compared to the matching ID field"), are refused; the view
    stays as it was."""
    reply = call(emulator09, "agent.view.set", params, rid="v1")
    assert (reply["id"], reply["error"]["code"]) == ("v1", code), reply
    assert emulator09.agent_view is None


def test_workspace_view_set_and_clear(emulator09):
    """0.9/socket-api.mdx "Workspace view presentation": the allowlist is reported, and
    ``workspace.list`` stays whole."""
    ok(emulator09, "workspace.create", {"cwd": "/tmp"})
    ok(emulator09, "workspace.create", {"cwd": "/tmp"})
    view = {"source": "orcr-test", "label": "zen", "workspace_ids": ["w1"]}
    got = ok(emulator09, "workspace.view.set", view)
    assert got == {"type": "workspace_view", "active": True, "source": "orcr-test", "label": "zen"}
    assert len(ok(emulator09, "workspace.list")["workspaces"]) == 2
    assert emulator09.workspace_view["workspace_ids"] == ["w1"]
    assert ok(emulator09, "workspace.view.clear", {"source": "x"})["active"] is True
    assert ok(emulator09, "workspace.view.clear", {"source": "orcr-test"})["active"] is False
