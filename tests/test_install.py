"""orcr install / uninstall run pip in orcr's own environment (as llm does)."""

from __future__ import annotations

import sys

from click.testing import CliRunner

from orcr_core.cli import cli


def test_install_runs_pip_in_process(monkeypatch):
    calls = []

    def fake_run_module(name, run_name):
        calls.append((name, run_name, list(sys.argv)))

    monkeypatch.setattr("orcr_core.cli.misc.run_module", fake_run_module)
    result = CliRunner().invoke(cli, ["install", "orcr-example", "-U"])
    assert result.exit_code == 0, result.output
    assert calls == [("pip", "__main__", ["pip", "install", "--upgrade", "orcr-example"])]
    result = CliRunner().invoke(cli, ["uninstall", "orcr-example", "-y"])
    assert calls[-1][2] == ["pip", "uninstall", "orcr-example", "-y"]


def test_install_failure_is_reported(monkeypatch):
    def failing(name, run_name):
        raise SystemExit(1)

    monkeypatch.setattr("orcr_core.cli.misc.run_module", failing)
    result = CliRunner().invoke(cli, ["install", "nope"])
    assert result.exit_code == 1 and "pip install nope failed" in result.output
