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


def test_uninstall_refuses_orcr_itself_in_every_spelling(monkeypatch):
    calls = []
    monkeypatch.setattr("orcr_core.cli.misc.run_module", lambda *a, **k: calls.append(a))
    for name in ("orcr", "ORCR", "orcr==0.1.0", "Orcr[test]", " orcr"):
        result = CliRunner().invoke(cli, ["uninstall", "-y", "orcr-example", name])
        assert result.exit_code == 2, (name, result.output)
        assert "not orcr itself" in result.output and "pip uninstall orcr" in result.output
    assert calls == []  # pip never ran
    result = CliRunner().invoke(cli, ["uninstall", "-y", "orcr-example", "orcr_extra"])
    assert result.exit_code == 0 and len(calls) == 1


def test_uninstall_without_a_terminal_needs_yes(monkeypatch):
    """pip would prompt and, with no terminal, end in a traceback: refuse up front."""
    calls = []
    monkeypatch.setattr("orcr_core.cli.misc.run_module", lambda *a, **k: calls.append(a))
    result = CliRunner().invoke(cli, ["uninstall", "orcr-example"], input="")
    assert result.exit_code == 2 and "--yes" in result.output and calls == []
