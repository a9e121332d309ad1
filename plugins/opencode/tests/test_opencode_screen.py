"""OpenCode's screens as the real 1.18.33 drew them in tmux (fixtures/screens)."""

from pathlib import Path

from orcr_opencode import OpenCodeProvider
from orcr_opencode.screen import usage_limit

from orcr_core.contracts import LaunchSpec

SCREENS = Path(__file__).resolve().parent / "fixtures" / "screens"
SPEC = LaunchSpec(uuid="u-1", path="a/b", cwd="/tmp/proj", data_dir="/tmp/x", options={})


def state(name: str):
    return OpenCodeProvider().screen_state((SCREENS / name).read_text(), SPEC)


def test_a_permission_question_names_what_it_asks_and_how_to_answer():
    s = state("1.18.33-permission-bash.txt")
    assert (s.state, s.kind, s.answer_keys) == ("dialog", "permission", ("enter",))
    assert "$ touch /tmp/work/ran-it" in s.reason
    assert "orcr agent attach a/b" in s.reason and "--key enter" in s.reason
    s = state("1.18.33-permission-external-dir.txt")
    assert s.kind == "permission" and "Access external directory /tmp/work" in s.reason


def test_the_always_allow_confirmation_is_a_question_too():
    s = state("1.18.33-always-allow.txt")
    assert (s.state, s.kind, s.answer_keys) == ("dialog", "permission", ())


#: the turn's error OpenCode 1.18.33 stored when it gave up retrying the OpenAI-compatible
#: API's 429 ``insufficient_quota`` (captured with the real CLI, tests/real_cli)
QUOTA_ERROR = (
    "APIError: You exceeded your current quota, please check your plan and billing details. "
    "For more information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)


def test_retrying_a_spent_quota_is_a_wait_on_the_usage_limit():
    """The footer "You exceeded your current quota ... [retrying in 3s attempt #5]"
    (captured from the real 1.18.33) is a usage-limit wait, not a working screen.

    Planted: screen_state not reading the retry footer -> fails (``unknown``)."""
    s = state("1.18.33-usage-limit-retrying.txt")
    assert (s.state, s.kind, s.reason, s.until) == ("waiting", "usage_limit", "usage limit", None)
    assert state("1.18.33-working.txt").kind != "usage_limit"


def test_a_turn_that_ended_on_its_quota_holds_opencode():
    """Planted: USAGE_LIMIT without ``exceeded your current quota`` -> fails (None)."""
    p = OpenCodeProvider()
    assert p.usage_limit(QUOTA_ERROR).kind == "usage_limit"
    assert p.usage_limit("APIError: Rate limit reached for requests") is None
    assert p.usage_limit("APIError: Internal server error") is None
    # OpenCode Go's own wording names the reset (its source, 1.18.33)
    go = "5-hour usage limit reached. It will reset in 2 hours 5 minutes. To continue ..."
    shown = usage_limit(go, now=1000.0)
    assert shown.until == 1000.0 + 2 * 3600 + 5 * 60
