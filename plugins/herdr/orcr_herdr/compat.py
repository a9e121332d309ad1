"""What orcr depends on in herdr's socket API, checked against a new herdr's schema.

``scripts/herdr-compat SCHEMA.json`` (what ``herdr api schema --json`` prints)
compares every method, result type, event and record field in :data:`USES`
with the schemas vendored for the emulator (``testing/orcr_testing/herdr/herdr_schema``
in the checkout; the script passes them, as they are not in orcr's wheel):
what was added, removed or changed, for orcr's use only. It exits 1 when
something orcr depends on was removed or changed against the newest vendored
schema (0.9, protocol 22), 0 otherwise; the comparison with 0.8's is shown
too. A change is any difference in the resolved JSON Schema of what orcr
sends or reads (a field's type, its required-ness, an enum's values).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: methods orcr sends (driver, notify sink) -> the result type it reads back
METHODS = {
    "ping": "pong",
    "session.snapshot": "session_snapshot",
    "workspace.list": "workspace_list",
    "workspace.create": "workspace_created",
    "layout.apply": "layout_apply",
    "pane.get": "pane_info",
    "tab.get": "tab_info",
    "pane.read": "pane_read",
    "pane.send_input": "ok",
    "pane.send_keys": "ok",
    "pane.close": "ok",
    "pane.move": "pane_move",
    "pane.focus": "pane_info",
    "pane.process_info": "pane_process_info",
    "pane.report_agent": "ok",  # herdr 0.9: resume_argv (orcr_herdr/native.py)
    "events.subscribe": "subscription_started",
    "notification.show": None,
}
#: lifecycle events orcr subscribes to (``orcr_herdr.driver.DEFAULT_SUBSCRIPTIONS``)
EVENTS = (
    "pane_created",
    "pane_closed",
    "pane_exited",
    "pane_updated",
    "pane_agent_detected",
    "tab_closed",
    "workspace_closed",
)
#: record fields orcr reads (``$defs`` of ``success_response``)
RECORDS = {
    "PaneInfo": (
        "pane_id",
        "workspace_id",
        "tab_id",
        "label",
        "agent",
        "agent_status",
        "agent_session",
        "terminal_id",
        "cwd",
        "foreground_cwd",
        "restore_error",
    ),
    "TabInfo": ("tab_id", "label"),
    "WorkspaceInfo": ("workspace_id", "label"),
    "AgentInfo": ("terminal_id", "name", "completion_seq", "state_change_seq"),
    "SessionSnapshot": ("workspaces", "tabs", "panes", "agents", "version", "protocol"),
    "PaneProcessInfo": ("shell_pid", "foreground_processes"),
    "PaneMoveResult": ("changed", "reason", "pane"),
    "ServerCapabilities": (),
}
USES = {"methods": METHODS, "events": EVENTS, "records": RECORDS}


class Schema:
    """One herdr API schema document, indexed by method, result type, event, record."""

    def __init__(self, doc: dict, name: str):
        self.doc, self.name = doc, name
        self.protocol = doc.get("protocol")
        s = doc["schemas"]
        self.methods = {b["properties"]["method"]["const"]: b for b in s["request"]["oneOf"]}
        results = s["success_response"]["$defs"]["ResponseResult"]["oneOf"]
        self.results = {b["properties"]["type"]["const"]: b for b in results}
        events = s["event"]["$defs"]["EventData"]["oneOf"]
        self.events = {b["properties"]["type"]["const"]: b for b in events}
        self.records = s["success_response"].get("$defs", {})

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        path = Path(path)
        return cls(json.loads(path.read_text()), path.name)

    def resolve(self, node: Any, depth: int = 0) -> Any:
        """``node`` with every ``$ref`` inlined (descriptions dropped: wording is no change)."""
        if depth > 12:
            return "…"
        if isinstance(node, list):
            return [self.resolve(n, depth + 1) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            return self.resolve(target, depth + 1)
        return {
            k: self.resolve(v, depth + 1)
            for k, v in node.items()
            if k not in ("description", "title", "$schema")
        }

    def field(self, record: str, name: str) -> tuple[Any, bool] | None:
        """(resolved schema, required) of ``record.name``, None when absent."""
        rec = self.records.get(record)
        if rec is None or name not in rec.get("properties", {}):
            return None
        return self.resolve(rec["properties"][name]), name in rec.get("required", [])


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def diff(new: Any, old: Any, path: str = "") -> list[tuple[str, str]]:
    """Differences between two resolved schemas: a property only in ``new`` is
    ``added`` (optional; orcr ignores fields it does not know, and herdr ignores
    params it is not sent), one only in ``old`` ``removed``, anything else
    (a type, an enum, required-ness) ``changed``."""
    if _same(new, old):
        return []
    if not (isinstance(new, dict) and isinstance(old, dict)):
        if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
            return [d for i, (a, b) in enumerate(zip(new, old, strict=True))
                    for d in diff(a, b, f"{path}[{i}]")]  # fmt: skip
        return [("changed", path or "(whole)")]
    out: list[tuple[str, str]] = []
    pa, pb = new.get("properties", {}), old.get("properties", {})
    ra, rb = set(new.get("required", [])), set(old.get("required", []))
    for key in sorted(set(pa) | set(pb)):
        where = f"{path}.{key}" if path else key
        if key not in pb:
            out.append(("changed" if key in ra else "added", where))
        elif key not in pa:
            out.append(("removed", where))
        else:
            if (key in ra) != (key in rb):
                out.append(("changed", f"{where} (required: {key in rb} -> {key in ra})"))
            out.extend(diff(pa[key], pb[key], where))
    for key in sorted(set(new) | set(old)):
        if key in ("properties", "required"):
            continue
        out.extend(diff(new.get(key), old.get(key), f"{path}/{key}" if path else key))
    return out


def compare(new: Schema, old: Schema) -> list[tuple[str, str]]:
    """``(kind, text)`` lines for what orcr uses: kind is ``removed``, ``changed``
    (both break orcr) or ``added`` (new beside what orcr uses, for information)."""
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def branch(kind: str, name: str, a: dict, b: dict) -> None:
        if (kind, name) in seen:
            return
        seen.add((kind, name))
        if name not in a and name in b:
            out.append(("removed", f"{kind} {name}"))
        elif name in a and name not in b:
            out.append(("added", f"{kind} {name} (orcr uses it; the older schema lacks it)"))
        elif name in a:
            for what, where in diff(new.resolve(a[name]), old.resolve(b[name])):
                out.append((what, f"{kind} {name}: {where}"))

    for method, result in METHODS.items():
        branch("method", method, new.methods, old.methods)
        if result is not None:
            branch("result", result, new.results, old.results)
    for event in EVENTS:
        branch("event", event, new.events, old.events)
    for record, fields in RECORDS.items():
        if record not in new.records:
            if record in old.records:
                out.append(("removed", f"record {record}"))
            continue
        for name in fields:
            a, b = new.field(record, name), old.field(record, name)
            if a is None and b is not None:
                out.append(("removed", f"field {record}.{name}"))
            elif a is not None and b is None:
                out.append(("added", f"field {record}.{name} (orcr reads it when present)"))
            elif a is not None and b is not None:
                if a[1] != b[1]:
                    out.append(("changed", f"field {record}.{name} (required: {b[1]} -> {a[1]})"))
                for what, where in diff(a[0], b[0]):
                    out.append((what, f"field {record}.{name}: {where}"))
    return out


def main(vendored: tuple[Path, Path], argv: list[str] | None = None) -> int:
    """Compare ``argv[0]``'s schema with ``vendored``: (herdr 0.9's, herdr 0.8's)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[0], file=sys.stderr)
        print("usage: scripts/herdr-compat SCHEMA.json  (herdr api schema --json > SCHEMA.json)")
        return 2
    try:
        new = Schema.load(argv[0])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"herdr-compat: {argv[0]} is not a herdr API schema: {exc!r}", file=sys.stderr)
        return 2
    broken = False
    for path, newest in ((vendored[0], True), (vendored[1], False)):
        old = Schema.load(path)
        lines = compare(new, old)
        print(f"{new.name} (protocol {new.protocol}) against {old.name} (protocol {old.protocol}):")
        for kind, text in lines:
            print(f"  {kind:<8} {text}")
        if not lines:
            print("  nothing orcr uses differs")
        if newest and any(kind in ("removed", "changed") for kind, _ in lines):
            broken = True
    if broken:
        print("herdr-compat: something orcr depends on was removed or changed (see above)")
        return 1
    print("herdr-compat: everything orcr depends on is as in the newest vendored schema")
    return 0
