"""orcr-pi runs the provider suite from its own tests, through orcr's pytest plugin
(orcr_testing.conformance.ProviderSuite), as any third-party provider does."""

from __future__ import annotations

from pathlib import Path

import pytest
from orcr_testing.conformance import ProviderSuite

orcr_pi = pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")

TURNS = [
    ("completed", "Hi there from fake", None),
    ("completed", "ran it", None),
    ("errored", None, None),
    ("interrupted", None, None),
]
RETRIES = [
    ("completed", "after the retry", None),
    ("completed", "thought answer\nsecond block", None),
    ("completed", "cut off ans", None),
    ("completed", "done", None),
]


class TestPiConformance(ProviderSuite):
    provider = orcr_pi.PiProvider
    fixtures = Path(__file__).resolve().parent / "fixtures"
    # pi's version is the launch's sidecar file, absent beside a fixture: None
    truth = {
        f"real-{release}-{kind}.jsonl": (None, "idle", turns)
        for release in ("0.73.1", "1.6.0")
        for kind, turns in (("turns", TURNS), ("retries", RETRIES))
    }
    launch_options = {"argv": ["pi"]}
