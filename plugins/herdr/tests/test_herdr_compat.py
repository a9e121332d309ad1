"""scripts/herdr-compat: a new herdr's schema against what orcr uses."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import orcr_herdr
from orcr_herdr import compat
from orcr_testing.herdr.schema import VENDORED, VENDORED_09

ROOT = Path(__file__).resolve().parents[3]


def _run(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "herdr-compat"), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _mutated(tmp_path, change) -> Path:
    doc = json.loads(VENDORED_09.read_text())
    change(doc)
    out = tmp_path / "new.json"
    out.write_text(json.dumps(doc))
    return out


def test_the_newest_vendored_schema_passes():
    r = _run(VENDORED_09)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nothing orcr uses differs" in r.stdout
    assert "field PaneInfo.restore_error" in r.stdout  # against 0.8's: added


def test_a_removed_field_orcr_reads_fails(tmp_path):
    def drop_label(doc):
        del doc["schemas"]["success_response"]["$defs"]["PaneInfo"]["properties"]["label"]

    r = _run(_mutated(tmp_path, drop_label))
    assert r.returncode == 1, r.stdout
    assert "removed  field PaneInfo.label" in r.stdout


def test_a_changed_type_or_a_new_required_param_fails(tmp_path):
    def change(doc):
        pane = doc["schemas"]["success_response"]["$defs"]["PaneInfo"]["properties"]
        pane["terminal_id"] = {"type": "integer"}
        target = doc["schemas"]["request"]["$defs"]["PaneTarget"]
        target["properties"]["scope"] = {"type": "string"}
        target["required"] = [*target.get("required", []), "scope"]

    r = _run(_mutated(tmp_path, change))
    assert r.returncode == 1
    assert "changed  field PaneInfo.terminal_id" in r.stdout
    assert "changed  method pane.get: params.scope" in r.stdout


def test_an_added_optional_field_is_information_only(tmp_path):
    def add(doc):
        pane = doc["schemas"]["success_response"]["$defs"]["PaneInfo"]["properties"]
        pane["agent_instance_id"] = {"type": ["string", "null"]}

    r = _run(_mutated(tmp_path, add))
    assert r.returncode == 0, r.stdout
    assert "added    result pane_info: pane.agent_instance_id" in r.stdout


def test_not_a_schema_is_a_usage_error(tmp_path):
    (tmp_path / "x.json").write_text("{}")
    r = _run(tmp_path / "x.json")
    assert r.returncode == 2 and "not a herdr API schema" in r.stderr


def test_every_method_orcr_sends_is_checked():
    """A method the driver (or the notify sink) starts sending must be added to USES."""
    src = Path(orcr_herdr.__file__).parent
    files = [p for p in src.glob("*.py")] + list((ROOT / "plugins").glob("*/orcr_*/sinks.py"))
    sent = set()
    for path in files:
        sent |= set(re.findall(r'request\(\s*"([a-z_]+\.[a-z_.]+)"', path.read_text()))
    assert sent and sent <= set(compat.METHODS), sent - set(compat.METHODS)
    assert compat.Schema.load(VENDORED).protocol == 20
    assert copy.deepcopy(compat.USES)["events"] == compat.EVENTS
