"""Each provider's declared sandbox paths hold where orcr looks for its transcript: a
sandboxed CLI must write its transcript where orcr reads it, or orcr loses its turns.

Planted: claude's ``sandbox_paths`` without its config dir -> test fails for claude.
"""

from __future__ import annotations

import os

import pytest

from orcr_core.contracts import LaunchSpec


def _spec(tmp_path, **options) -> LaunchSpec:
    return LaunchSpec(uuid="u", path="p", cwd=str(tmp_path), data_dir=str(tmp_path / "d"),
                      options=options)  # fmt: skip


def _transcripts(name: str, provider, spec: LaunchSpec) -> str:
    """Where the adapter reads the transcript of an agent with ``spec``."""
    home = os.path.expanduser("~")
    return {
        "claude": f"{home}/.claude/projects/x.jsonl",
        "codex": f"{home}/.codex/sessions/2026/01/01/rollout-x.jsonl",
        "gemini": f"{home}/.gemini/tmp/p/chats/session-x.json",
        "opencode": provider.db(spec) if name == "opencode" else "",
        "pi": provider.session_path(spec) if name == "pi" else "",
    }[name]


def _providers():
    from orcr_claude.provider import ClaudeProvider
    from orcr_codex.provider import CodexProvider
    from orcr_gemini.provider import GeminiProvider
    from orcr_opencode.provider import OpenCodeProvider

    out = [ClaudeProvider(), CodexProvider(), GeminiProvider(), OpenCodeProvider()]
    try:
        from orcr_pi.provider import PiProvider

        out.append(PiProvider())
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("provider", _providers(), ids=lambda p: p.name)
def test_transcript_is_writable_in_the_sandbox(provider, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(var, raising=False)
    spec = _spec(tmp_path)
    writable = [spec.data_dir, *(os.path.normpath(p) for p in provider.sandbox_paths(spec))]
    where = _transcripts(provider.name, provider, spec)
    assert any(where.startswith(w.rstrip("/") + "/") for w in writable), (where, writable)
    for var in provider.sandbox_env:
        assert var.isupper()
