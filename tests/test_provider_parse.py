"""`orcr provider parse` prints what the adapter reads.

orcr's own fixtures (plugins/*/tests/fixtures) always run; the third-party corpus
is the ``conformance`` group (see conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orcr_core.kit.testing import corpus_dir

ROOT = Path(__file__).resolve().parent.parent
OWN = sorted(ROOT.glob("plugins/*/tests/fixtures/*.jsonl"))


def check_parse(orcr_home, path: Path) -> dict:
    # plugins/<provider>/tests/fixtures/x.jsonl, or <corpus>/<provider>/x.jsonl
    provider = path.parents[2].name if path.parent.name == "fixtures" else path.parent.name
    r = orcr_home.run("provider", "parse", provider, str(path), "--json", check=True)
    out = json.loads(r.stdout)
    from orcr_core.pm.plugins import build_registry, get_plugin_manager

    expected = build_registry(get_plugin_manager()).providers[provider].summarize(str(path))
    assert out == expected
    assert set(out) == {"provider", "version", "state", "turns"}
    assert out["state"] in ("idle", "working", "blocked", "unknown")
    return out


def test_own_fixtures_exist_for_every_transcript_provider():
    # OpenCode keeps its sessions in SQLite: its fixtures are rows, not JSONL
    assert {p.parent.parent.parent.name for p in OWN} == {"claude", "codex", "gemini", "pi"}


@pytest.mark.parametrize("path", OWN, ids=[p.name for p in OWN])
def test_parse_matches_the_adapter(orcr_home, path):
    if path.parent.parent.parent.name == "pi":  # a distribution of its own (plugins/pi)
        pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")
    out = check_parse(orcr_home, path)
    assert out["turns"], "every own fixture has at least one turn"


def test_parse_ground_truth_spot_checks(orcr_home):
    claude = ROOT / "plugins" / "claude" / "tests" / "fixtures"
    out = check_parse(orcr_home, claude / "orcr-1.0.98-init-sidechain.jsonl")
    assert out["version"] == "1.0.98" and out["state"] == "idle"
    assert [t["status"] for t in out["turns"]] == ["completed"]
    assert out["turns"][0]["final_text"].startswith("I drafted a CLAUDE.md")
    out = check_parse(orcr_home, claude / "orcr-2.1.38-split-interrupted.jsonl")
    assert [t["status"] for t in out["turns"]] == ["interrupted"]
    r = orcr_home.run("provider", "parse", "nope", str(claude / "orcr-1.0.98-init-sidechain.jsonl"))
    assert r.returncode == 1 and "unknown provider 'nope'" in r.stderr


@pytest.mark.conformance
def test_parse_matches_the_adapter_on_the_corpus(orcr_home):
    corpus = sorted(corpus_dir().glob("*/*.jsonl"))
    assert len(corpus) >= 9, corpus
    for path in corpus:
        check_parse(orcr_home, path)
    out = check_parse(orcr_home, corpus_dir() / "claude" / "claude-2.1.38-tool-heavy.jsonl")
    assert [t["status"] for t in out["turns"]] == ["interrupted", "interrupted"]
