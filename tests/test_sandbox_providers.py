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


def test_a_config_file_an_option_names_is_bound_read_only(tmp_path, monkeypatch):
    """OpenCode's ``config`` and Gemini CLI's ``settings_dir`` live wherever the user
    put them (a hidden home, /tmp): ``sandbox_read`` binds them back read-only. Found
    by the real_cli tier: without it sandboxed OpenCode ran on its default model (and
    was refused opencode.ai). Planted: ``wrap`` not asking ``sandbox_read`` -> fails."""
    from orcr_gemini.provider import GeminiProvider
    from orcr_opencode.provider import OpenCodeProvider

    from orcr_core.sandbox import policy

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config, settings = tmp_path / "home" / "oc.json", tmp_path / "gem"
    for provider, options, path in (
        (OpenCodeProvider(), {"config": str(config)}, str(config)),
        (GeminiProvider(), {"settings_dir": str(settings)}, str(settings)),
    ):
        spec = _spec(tmp_path, **options)
        pol = {"home": str(tmp_path / "home"), "cwd": str(tmp_path), "data_dir": spec.data_dir,
               "allow_read": [], "allow_write": [], "deny_read": [], "hide": [],
               "allow_net": [], "pass_env": [], "binary": "/usr/bin/bwrap"}  # fmt: skip
        argv = policy.wrap(pol, provider, spec, ["true"], {})
        binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind-try"]
        assert os.path.realpath(path) in binds, (provider.name, argv)


def test_the_launcher_of_a_clone_under_tmp_is_bound(tmp_path, monkeypatch):
    """With ``allow_net`` hosts the sandbox runs orcr's launcher (the bridge) before the
    CLI: its interpreter in a virtualenv under /tmp (CI's clone) must be bound, or
    bubblewrap cannot exec it (``execvp .venv/bin/python: No such file``; the real_cli
    tier run from a clone under /tmp showed it). Planted: only the home checked (the
    old ``path.startswith(home)``) -> fails."""
    from orcr_claude.provider import ClaudeProvider

    from orcr_core.sandbox import policy

    monkeypatch.setattr(policy.sys, "prefix", "/tmp/clone/.venv")
    spec = _spec(tmp_path)
    pol = {"home": str(tmp_path / "home"), "cwd": str(tmp_path), "data_dir": spec.data_dir,
           "allow_read": [], "allow_write": [], "deny_read": [], "hide": [],
           "allow_net": ["127.0.0.1:8080"], "pass_env": [], "binary": "/usr/bin/bwrap"}  # fmt: skip
    argv = policy.wrap(pol, ClaudeProvider(), spec, ["/usr/bin/true"], {})
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind-try"]
    assert "/tmp/clone/.venv" in binds, argv


def test_orcr_s_plugins_under_tmp_are_bound_for_a_cli_s_hook(tmp_path, monkeypatch):
    """Gemini CLI's turn-end hook runs orcr's interpreter on ``orcr_gemini/hook.py``
    inside the sandbox: from a clone under /tmp (CI's, the real_cli tier's) the plugin's
    folder was hidden and every turn end failed ("can't open file
    '/tmp/rc/plugins/gemini/orcr_gemini/hook.py'"). orcr's packages are bound whatever
    the agent's program is. Planted: bound only when argv runs orcr's interpreter -> fails."""
    import sys
    import types

    from orcr_gemini.provider import GeminiProvider

    from orcr_core.sandbox import policy

    plugin = types.ModuleType("orcr_clonedplugin")
    plugin.__file__ = "/tmp/clone/plugins/x/orcr_clonedplugin/__init__.py"
    monkeypatch.setitem(sys.modules, "orcr_clonedplugin", plugin)
    spec = _spec(tmp_path)
    pol = {"home": str(tmp_path / "home"), "cwd": str(tmp_path), "data_dir": spec.data_dir,
           "allow_read": [], "allow_write": [], "deny_read": [], "hide": [],
           "allow_net": [], "pass_env": [], "binary": "/usr/bin/bwrap"}  # fmt: skip
    argv = policy.wrap(pol, GeminiProvider(), spec, ["/usr/bin/true"], {})
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind-try"]
    assert "/tmp/clone/plugins/x" in binds, argv
