"""OpenCode's screens as the real 1.18.33 drew them in tmux (fixtures/screens)."""

from pathlib import Path

import pytest
from orcr_opencode import OpenCodeProvider

from orcr_core.contracts import LaunchSpec

SCREENS = Path(__file__).resolve().parent / "fixtures" / "screens"
SPEC = LaunchSpec(uuid="u-1", path="a/b", cwd="/tmp/proj", data_dir="/tmp/x", options={})


def state(name: str):
    return OpenCodeProvider().screen_state((SCREENS / name).read_text(), SPEC)


@pytest.mark.parametrize("name", ["1.18.33-ready.txt", "1.18.33-ready-after-turn.txt"])
def test_ready_at_its_input(name):
    assert state(name).state == "ready"


@pytest.mark.parametrize("name", ["1.18.33-booting.txt", "1.18.33-working.txt"])
def test_not_ready_while_booting_or_working(name):
    assert state(name).state == "unknown"


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
