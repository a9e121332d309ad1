"""Gemini CLI runs the provider suite (orcr_testing.conformance.ProviderSuite) on the
session file and screens the real Gemini CLI 0.61.0 wrote (fixtures/README.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from orcr_gemini import GeminiProvider
from orcr_testing.conformance import ProviderSuite

from orcr_core.contracts import LaunchSpec


class TestGeminiConformance(ProviderSuite):
    provider = GeminiProvider
    fixtures = Path(__file__).resolve().parent / "fixtures"
    # "a long one" is held open at the end of the capture; the version is what the
    # launch learned (None beside a fixture)
    truth = {
        "real-0.61.0-turns.jsonl": (None, "working", [
            ("completed", "Hi there from fake gemini", None),
            ("completed", "made it", None),
            ("interrupted", None, None),
            ("open", None, None),
        ]),
    }  # fmt: skip
    launch_options = {"argv": ["gemini"]}

    def spec(self, tmp_path: Path) -> LaunchSpec:
        """Folder trust off in the agent's Gemini home: its composer is then ready at
        once (with trust unknown, GeminiProvider waits for the trust question)."""
        home = tmp_path / "home"
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(
            json.dumps({"security": {"folderTrust": {"enabled": False}}})
        )
        spec = super().spec(tmp_path)
        return dataclasses.replace(spec, options={**spec.options, "home": str(home)})

    screens = {
        "0.61.0-ready.txt": "ready",
        "0.61.0-permission.txt": "dialog",
    }
