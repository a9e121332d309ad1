"""`orcr provider parse` prints what the adapter reads, for every shared fixture."""

from __future__ import annotations

import json

import pytest

from orcr_core.testing import shared_dir

FIXTURES = sorted((shared_dir() / "fixtures" / "transcripts").glob("*/*.jsonl"))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_parse_matches_the_adapter(orcr_home, path):
    provider = path.parent.name
    r = orcr_home.run("provider", "parse", provider, str(path), "--json", check=True)
    out = json.loads(r.stdout)
    from orcr_core.plugins import build_registry, get_plugin_manager

    expected = build_registry(get_plugin_manager()).providers[provider].summarize(str(path))
    assert out == expected
    assert set(out) == {"provider", "version", "state", "turns"}
    assert out["state"] in ("idle", "working", "blocked", "unknown")


def test_parse_ground_truth_spot_checks(orcr_home):
    base = shared_dir() / "fixtures" / "transcripts"
    out = json.loads(
        orcr_home.run(
            "provider",
            "parse",
            "claude",
            str(base / "claude" / "claude-1.0.98-init.jsonl"),
            "--json",
            check=True,
        ).stdout
    )
    assert out["version"] == "1.0.98" and out["state"] == "idle"
    assert [t["status"] for t in out["turns"]] == ["completed"]
    assert out["turns"][0]["final_text"].startswith("I've created a basic CLAUDE.md file")
    out = json.loads(
        orcr_home.run(
            "provider",
            "parse",
            "claude",
            str(base / "claude" / "claude-2.1.38-tool-heavy.jsonl"),
            "--json",
            check=True,
        ).stdout
    )
    assert [t["status"] for t in out["turns"]] == ["interrupted", "interrupted"]
    r = orcr_home.run(
        "provider", "parse", "nope", str(base / "claude" / "claude-1.0.98-init.jsonl")
    )
    assert r.returncode == 1 and "unknown provider 'nope'" in r.stderr
