"""Codex's start-up screens, as captured from the real 0.171.0 in tmux
(fixtures/screens): the trust question in a git repository, the ready input."""

from __future__ import annotations

from pathlib import Path

import pytest
from orcr_codex import CodexProvider

from orcr_core.contracts import LaunchSpec

SCREENS = Path(__file__).parent / "fixtures" / "screens"
SPEC = LaunchSpec(uuid="u", path="x/one", cwd="/tmp/dlg/repo1", data_dir="/d")


def state(name: str):
    return CodexProvider().screen_state((SCREENS / name).read_text(), SPEC)


def test_trust_prompt_in_a_git_repository():
    s = state("0.171.0-trust.txt")
    assert (s.state, s.kind, s.answer_keys, s.answer_option) == (
        "dialog",
        "trust",
        ("enter",),  # it opens on "1. Trust and continue"
        "trust_cwd",
    )
    assert s.reason == (
        "Codex asks whether to trust /tmp/dlg/repo1 — answer it with "
        "`orcr agent attach x/one`, or set providers.codex.trust_cwd = true"
    )


def test_trust_prompt_with_the_second_option_highlighted_moves_up():
    screen = (SCREENS / "0.171.0-trust.txt").read_text()
    moved = screen.replace("› 1. Trust", "  1. Trust").replace("  2. Back", "› 2. Back")
    assert CodexProvider().screen_state(moved, SPEC).answer_keys == ("up", "enter")


@pytest.mark.parametrize(
    "name", ["0.171.0-ready.txt", "0.171.0-ready-git.txt", "0.104.0-ready.txt"]
)
def test_ready_input(name):
    assert state(name).state == "ready"


def test_trust_prompt_of_0_104():
    """0.104 asks "Do you trust the contents of this directory?", opening on "1. Yes,
    continue"."""
    s = state("0.104.0-trust.txt")
    assert (s.state, s.kind, s.answer_keys) == ("dialog", "trust", ("enter",))


def test_a_composer_drawn_while_codex_still_connects_is_not_ready():
    """0.171 draws its composer before its app-server answers; the trust question
    can come after that, so typing then would lose the prompt to it."""
    assert state("0.171.0-booting.txt").state == "unknown"


def test_a_blank_screen_is_unknown():
    assert CodexProvider().screen_state("\n\n", SPEC).state == "unknown"


# -- approvals asked mid-turn (orcr_core/agents/asking.py reads these) ------------------


def test_approval_mid_turn_names_the_command_and_the_key_for_yes():
    s = state("0.171.0-approval.txt")
    assert (s.state, s.kind, s.answer_keys, s.answer_option) == (
        "dialog",
        "permission",
        ("enter",),  # it opens on "1. Yes, proceed (y)"
        None,
    )
    assert s.reason == (
        "Codex asks: Would you like to run the following command? "
        "(`touch /tmp/orcr-test/ran-it`) — answer it with `orcr agent attach x/one`, or "
        "`orcr agent send x/one --key enter` for “Yes”"
    )


def test_a_turn_running_is_no_approval():
    assert state("0.171.0-working.txt").state == "ready"
