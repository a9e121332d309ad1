"""Each provider's ``input_state``: what its composer holds and whether a turn runs,
read from real captured screens (plugins/*/tests/fixtures/screens) and from those
screens with a prompt put in the composer. orcr presses a prompt's Enter again only
when the composer holds it and nothing runs (orcr_core/agents/resubmit.py): a
composer read from the chat above it, or a running turn missed, is an Enter into a
turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from orcr_claude import ClaudeProvider
from orcr_codex import CodexProvider
from orcr_gemini import GeminiProvider
from orcr_opencode import OpenCodeProvider
from orcr_providers.echo import EchoProvider

from orcr_core.agents.resubmit import holds

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"


def screen(provider: str, name: str) -> str:
    return (PLUGINS / provider / "tests" / "fixtures" / "screens" / name).read_text()


CASES = [
    # (provider, fixture, composer, running)
    (ClaudeProvider, "claude", "2.1.332-ready.txt", "", None),
    (ClaudeProvider, "claude", "2.1.332-working.txt", "", "esc to interrupt"),
    (ClaudeProvider, "claude", "2.1.332-permission.txt", None, None),
    (ClaudeProvider, "claude", "2.1.332-trust.txt", None, None),
    (CodexProvider, "codex", "0.171.0-approval.txt", None, None),
    (CodexProvider, "codex", "0.171.0-trust.txt", None, None),
    (GeminiProvider, "gemini", "0.61.0-ready.txt", "", None),
    (GeminiProvider, "gemini", "0.61.0-working.txt", "", "esc to cancel"),
    (OpenCodeProvider, "opencode", "1.18.33-ready.txt", "", None),
    (OpenCodeProvider, "opencode", "1.18.33-ready-after-turn.txt", "", None),
    (OpenCodeProvider, "opencode", "1.18.33-working.txt", "", "esc interrupt"),
    (OpenCodeProvider, "opencode", "1.18.33-permission-bash.txt", None, None),
]


@pytest.mark.parametrize(("cls", "provider", "name", "composer", "running"), CASES)
def test_the_composer_and_a_running_turn_on_captured_screens(
    cls, provider, name, composer, running
):
    got = cls().input_state(screen(provider, name))
    assert (got.composer, got.running) == (composer, running)


def _replace(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_claude_reads_its_composer_not_the_prompts_echoed_above_it():
    """2.1.332-working.txt shows "❯ slow one" in the chat: not the composer."""
    working = screen("claude", "2.1.332-working.txt")
    assert not holds(ClaudeProvider().input_state(working).composer, "slow one")
    ready = screen("claude", "2.1.332-ready.txt")
    # 2.1.332 draws its empty composer as "❯" and a no-break space
    typed = ClaudeProvider().input_state(_replace(ready, "\n❯\u00a0", "\n❯\u00a0fix the tests"))
    assert (typed.composer, typed.running) == ("fix the tests", None)


def test_codex_reads_the_composer_over_its_status_line():
    text = screen("codex", "0.171.0-working.txt")  # "› slow one" is the chat's
    got = CodexProvider().input_state(text)
    assert got.composer == "Ask Codex to do anything" and not holds(got.composer, "slow one")
    typed = _replace(text, "› Ask Codex to do anything", "› fix the tests")
    assert CodexProvider().input_state(typed).composer == "fix the tests"
    running = _replace(text, "• long ans", "• Working (3s • esc to interrupt)")
    assert CodexProvider().input_state(running).running == "esc to interrupt"


def test_gemini_reads_its_last_input_line_not_the_prompt_echoed_above():
    text = screen("gemini", "0.61.0-working.txt")  # " > broken please" is the chat's
    assert GeminiProvider().input_state(text).composer == ""
    typed = _replace(text, ">   Type your message or @path/to/file", ">   fix the tests")
    assert GeminiProvider().input_state(typed).composer == "fix the tests"


def test_opencode_reads_its_box_without_the_agent_line():
    text = screen("opencode", "1.18.33-ready-after-turn.txt")  # "a slow one": the chat's
    lines = text.splitlines()
    bottom = max(i for i, ln in enumerate(lines) if ln.strip().startswith("╹"))
    lines[bottom - 3] = lines[bottom - 3].replace("┃", "┃  fix the tests", 1)
    got = OpenCodeProvider().input_state("\n".join(lines))
    assert (got.composer, got.running) == ("fix the tests", None)


def test_echo_reads_its_bottom_line_and_its_header():
    idle = "orcr echo agent · idle\n\nyou: hi\necho: hi\n\n> fix↵the tests"
    got = EchoProvider().input_state(idle)
    assert (got.composer, got.running) == ("fix\nthe tests", None)
    assert holds(got.composer, "fix\nthe tests")
    busy = "orcr echo agent · working (turn 2)\n\nyou: hi\n\n> "
    got = EchoProvider().input_state(busy)
    assert (got.composer, got.running) == ("", "working (turn")
