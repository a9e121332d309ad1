"""Gemini CLI's screens (fixtures/screens, captured from 0.61.0 in tmux) read by
orcr_gemini.screen."""

from pathlib import Path

from orcr_gemini.screen import screen_state

from orcr_core.contracts import LaunchSpec

SCREENS = Path(__file__).parent / "fixtures" / "screens"
SPEC = LaunchSpec("u", "demo/g", "/home/dev/shop", "/d")


def read(name: str) -> str:
    return (SCREENS / name).read_text()


def test_ready_at_its_composer():
    assert screen_state(read("0.61.0-ready.txt"), SPEC).state == "ready"


def test_a_working_screen_is_no_question():
    assert screen_state(read("0.61.0-working.txt"), SPEC).state != "dialog"


def test_the_permission_question_names_the_tool_and_its_command():
    s = screen_state(read("0.61.0-permission.txt"), SPEC)
    assert (s.state, s.kind, s.answer_keys) == ("dialog", "permission", ("enter",))
    assert "Allow execution of [Shell]?" in s.reason
    assert "`Shell: touch /home/dev/shop/ran`" in s.reason
    assert "orcr agent send demo/g --key enter" in s.reason


def test_the_trust_question_is_answered_by_trust_folder_only_with_trust_cwd():
    screen = "\n".join([
        "╭──────────────────────────────────────────────╮",
        "│ Do you trust the files in this folder?       │",
        "│                                              │",
        "│ ● 1. Trust folder (shop)                     │",
        "│   2. Trust parent folder (dev)               │",
        "│   3. Don't trust                             │",
        "╰──────────────────────────────────────────────╯",
    ])  # fmt: skip
    s = screen_state(screen, SPEC)
    assert (s.state, s.kind, s.answer_option, s.answer_keys) == (
        "dialog", "trust", "trust_cwd", ("enter",),
    )  # fmt: skip
    assert "/home/dev/shop" in s.reason


def test_the_sign_in_question_waits_for_a_person():
    screen = (
        "│ How would you like to authenticate for this project? │\n│ ● 1. Sign in with Google │"
    )
    s = screen_state(screen, SPEC)
    assert (s.state, s.kind, s.answer_keys) == ("dialog", "login", ())


def test_a_blank_screen_is_unknown():
    assert screen_state("\n\n", SPEC).state == "unknown"


def test_a_trust_question_answered_above_a_new_composer_is_past():
    """After "Trust folder" Gemini CLI restarts and draws a new banner and composer
    under the answered question, which stays on screen."""
    screen = "\n".join([
        "│ Do you trust the files in this folder?       │",
        "│ ● 1. Trust folder (shop)                     │",
        "│   2. Don't trust                             │",
        " Gemini CLI is restarting to apply the trust changes...",
        " >   Type your message or @path/to/file",
    ])  # fmt: skip
    assert screen_state(screen, SPEC).state == "ready"


def test_a_trust_question_answered_is_no_question_while_the_cli_restarts():
    """orcr pressed "Trust folder" (trust_cwd): the question stays drawn over the restart
    line until the new process draws; it must not be answered again meanwhile."""
    screen = "\n".join([
        "│ Do you trust the files in this folder?       │",
        "│ ● 1. Trust folder (shop)                     │",
        "│   2. Don't trust                             │",
        " Gemini CLI is restarting to apply the trust changes...",
    ])  # fmt: skip
    assert screen_state(screen, SPEC).state == "unknown"


def test_the_usage_limit_question_is_a_wait_on_the_limit():
    """Captured from the real Gemini CLI 0.61.0 answered with the Gemini API's 429 for a
    spent daily quota (tests/fake_models/limits.py ``gemini_daily``): a wait (it holds
    new gemini agents), not a permission question, and no reset is named.

    Planted: usage_limit not consulted by screen_state -> fails (``unknown``)."""
    s = screen_state(read("0.61.0-usage-limit.txt"), SPEC)
    assert (s.state, s.kind, s.until) == ("waiting", "usage_limit", None)
    assert s.reason.startswith("usage limit; Gemini CLI asks to keep trying or stop")
    assert "orcr agent attach demo/g" in s.reason
    # the working screen and the permission question are no usage limit
    for name in ("0.61.0-working.txt", "0.61.0-permission.txt", "0.61.0-ready.txt"):
        assert screen_state(read(name), SPEC).kind != "usage_limit", name


def test_the_usage_limit_question_with_its_reset():
    """With a quota that names its reset Gemini CLI adds "Access resets at 3:45 PM UTC."
    (its source's ``getResetTimeMessage``: en-US, hour and minute, the zone's short
    name; not captured: the API-key path gave none) under the first line."""
    screen = read("0.61.0-usage-limit.txt").replace(
        "│ /stats model for usage details",
        "│ Access resets at 3:45 PM UTC.\n│ /stats model for usage details",
    )
    s = screen_state(screen, SPEC)
    assert (s.state, s.kind) == ("waiting", "usage_limit") and s.until is not None
    assert s.reason.startswith("usage limit until 15:45; Gemini CLI asks")
