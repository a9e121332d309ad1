"""Claude Code's start-up screens, as captured from the real 2.1.332 in tmux
(fixtures/screens): each dialog recognised with the keys that answer it."""

from __future__ import annotations

from pathlib import Path

import pytest
from orcr_claude import ClaudeProvider

from orcr_core.contracts import LaunchSpec

SCREENS = Path(__file__).parent / "fixtures" / "screens"
SPEC = LaunchSpec(uuid="u", path="w/one", cwd="/tmp/dlg/proj1", data_dir="/d")


def state(name: str):
    return ClaudeProvider().screen_state((SCREENS / name).read_text(), SPEC)


def test_trust_dialog_is_answered_yes_by_moving_down_from_no_exit():
    s = state("2.1.332-trust.txt")
    assert (s.state, s.kind, s.answer_keys, s.answer_option) == (
        "dialog",
        "trust",
        ("down", "enter"),
        "trust_cwd",
    )
    assert s.reason == (
        "Claude Code asks whether to trust /tmp/dlg/proj1 — answer it with "
        "`orcr agent attach w/one`, or set providers.claude.trust_cwd = true"
    )


def test_trust_dialog_with_yes_highlighted_needs_only_enter():
    screen = (SCREENS / "2.1.332-trust.txt").read_text()
    moved = screen.replace(" ❯ No, exit", "   No, exit").replace(
        "   Yes, I trust this folder", " ❯ Yes, I trust this folder"
    )
    assert ClaudeProvider().screen_state(moved, SPEC).answer_keys == ("enter",)


def test_trust_dialog_of_1_0_98_boxed_and_numbered_is_answered_with_enter():
    """1.0.x asks "Do you trust the files in this folder?" in a box, its options
    numbered ("│ ❯ 1. Yes, proceed │"), opening on Yes: Enter answers it."""
    s = state("1.0.98-trust.txt")
    assert (s.state, s.kind, s.answer_keys, s.answer_option) == (
        "dialog",
        "trust",
        ("enter",),
        "trust_cwd",
    )
    moved = (
        (SCREENS / "1.0.98-trust.txt")
        .read_text()
        .replace("│ ❯ 1. Yes, proceed", "│   1. Yes, proceed")
        .replace("│   2. No, exit    ", "│ ❯ 2. No, exit    ")
    )
    assert ClaudeProvider().screen_state(moved, SPEC).answer_keys == ("up", "enter")


def test_input_below_an_answered_1_0_98_dialog_is_ready():
    """1.0.x leaves the answered trust question on the screen and draws its input
    below it: ready, not the question again (orcr stayed ``starting`` forever)."""
    assert state("1.0.98-trust-answered.txt").state == "ready"


def test_api_key_approval_waits_for_a_person():
    s = state("2.1.332-api-key.txt")
    assert (s.state, s.kind, s.answer_option) == ("dialog", "api_key", None)
    assert s.answer_keys == ("up", "enter")  # "Yes" is above the highlighted "No"
    assert "`orcr agent send w/one --key up --key enter` uses it" in s.reason


@pytest.mark.parametrize(
    "name", ["2.1.332-onboarding-theme.txt", "2.1.332-onboarding-security.txt"]
)
def test_first_run_setup_waits_for_a_person(name):
    s = state(name)
    assert (s.state, s.kind, s.answer_option) == ("dialog", "onboarding", None)
    assert "first-run setup" in s.reason and "orcr agent attach w/one" in s.reason


def test_another_question_in_the_dialog_frame_waits_for_a_person():
    """A question the adapter does not name (2.1.332 asks this one when the permission
    mode is ``default`` and auto mode is not disabled) still blocks: never typed into."""
    screen = "\n".join(
        [
            "─" * 60,
            "  Make auto mode your default permission mode?",
            "",
            "  ❯ Yes, make it my default",
            "    No, keep default mode",
            "",
            "  Enter to confirm · Esc to cancel",
        ]
    )
    s = ClaudeProvider().screen_state(screen, SPEC)
    assert (s.state, s.kind, s.answer_option) == ("dialog", "question", None)
    assert s.reason == (
        "Claude Code asks 'Make auto mode your default permission mode?' before its input "
        "— answer it with `orcr agent attach w/one`"
    )


def test_ready_input():
    assert state("2.1.332-ready.txt").state == "ready"


def test_a_blank_or_half_drawn_screen_is_unknown():
    assert ClaudeProvider().screen_state("", SPEC).state == "unknown"
    banner = (SCREENS / "2.1.332-ready.txt").read_text().splitlines()[:4]
    assert ClaudeProvider().screen_state("\n".join(banner), SPEC).state == "unknown"


# -- questions asked mid-turn (orcr_core/agents/asking.py reads these) ------------------


def test_permission_prompt_mid_turn_names_the_command_and_the_key_for_yes():
    """2.1.332's Bash permission prompt, under the prompts echoed with the same ``❯``."""
    s = state("2.1.332-permission.txt")
    assert (s.state, s.kind, s.answer_keys, s.answer_option) == (
        "dialog",
        "permission",
        ("enter",),  # it opens on "1. Yes"
        None,  # never answered by orcr: a person decides what a tool may do
    )
    assert s.reason == (
        "Claude Code asks permission (Bash command `touch /tmp/orcr-test/ran-it`): Do you "
        "want to proceed? — answer it with `orcr agent attach w/one`, or "
        "`orcr agent send w/one --key enter` for “1. Yes”"
    )


def test_permission_prompt_with_another_option_highlighted_moves_up_to_yes():
    screen = (SCREENS / "2.1.332-permission.txt").read_text()
    moved = screen.replace(" ❯ 1. Yes", "   1. Yes").replace("   3. No", " ❯ 3. No")
    assert ClaudeProvider().screen_state(moved, SPEC).answer_keys == ("up", "up", "enter")


def test_ask_user_question_mid_turn_waits_for_a_person():
    s = state("2.1.332-ask-user.txt")
    assert (s.state, s.kind, s.answer_keys) == ("dialog", "question", ())
    assert s.reason == (
        "Claude Code asks 'Which colour do you prefer?' — answer it with `orcr agent attach w/one`"
    )


def test_a_turn_running_is_no_question():
    """Working: "esc to interrupt" under the input; nothing to answer."""
    assert state("2.1.332-working.txt").state == "ready"
