"""Every Codex fixture against its ground truth, whole and in chunks.

Two sets: orcr's own fixtures (``fixtures/``, written from the documented format,
README.md there says what each exercises, OWN_TRUTH below what it reads as) always run; the third-party corpus
(``shared/fixtures/transcripts/codex``, ground truth in its SOURCES.md) is the
``conformance`` group, run when the corpus is found.
"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orcr_codex import CodexProvider, summarize
from orcr_testing.conformance import ProviderSuite

from orcr_core.kit.adapter_helpers import summary
from orcr_core.kit.testing import (
    FakeClock,
    check_summary,
    cuts_mid_line,
    quiet_copy,
    transcript_fixtures,
)
from orcr_core.kit.testing import feed_in_chunks as _feed_in_chunks

OWN = Path(__file__).parent / "fixtures"

EPISODIC = (
    "Episodic memory is the ability to remember specific personal experiences, including what "
    "happened, where and when it happened, and often the subjective feeling of having lived "
    "through it. In cognitive"
)
# file -> (version, final state, [(status, first 200 code points of final text, full length)])
OWN_TRUTH = {
    "orcr-0.128.0-exec-1turn.jsonl": (
        "0.128.0",
        "idle",
        [
            (
                "completed",
                "Episodic memory holds the experiences a person has lived, with their time and "
                "place. Semantic memory holds facts without that context.",
                None,
            )
        ],
    ),
    "orcr-0.155.1-paginated.jsonl": ("0.155.1", "idle", [("completed", "ok", 2)]),
    "orcr-0.104.0-desktop-2turns.jsonl": (
        "0.104.0-alpha.1",
        "idle",
        [
            ("completed", "There is one file: README.md.", None),
            ("completed", "README.md is 1 KiB.", None),
        ],
    ),
    "orcr-0.104.0-desktop-unfinished.jsonl": ("0.104.0-alpha.1", "working", [("open", None, None)]),
    "orcr-0.58.0-legacy-inprogress.jsonl": ("0.58.0", "working", [("open", None, None)]),
    # captured from the real Codex in the real_cli tier (test_model_variety_codex.py)
    "real-0.171.0-answer-shapes.jsonl": (
        "0.171.0",
        "idle",
        [
            ("completed", "The answer after thinking", None),
            ("completed", "First part. Second part.", None),
            ("completed", "Second message.", None),
            ("completed", "It said hi.", None),
            ("errored", None, None),
            ("completed", None, None),
            ("completed", None, None),
            ("completed", "Still here.", None),
        ],
    ),
    "real-0.171.0-api-errors.jsonl": (
        "0.171.0",
        "idle",
        [
            ("completed", "after the overload", None),
            ("completed", "after the broken stream", None),
            ("errored", None, None),
            ("errored", None, None),
            ("completed", "working again", None),
        ],
    ),
}
CORPUS_TRUTH = {
    "codex-0.128.0-exec-1turn.jsonl": ("0.128.0", "idle", [("completed", EPISODIC, 353)]),
    "codex-0.155.1-exec-paginated.jsonl": ("0.155.1", "idle", [("completed", "ok", 2)]),
    "codex-0.104.0-alpha.1-desktop-2turns.jsonl": (
        "0.104.0-alpha.1",
        "idle",
        [
            ("completed", "[REDACTED_LAST_AGENT_MESSAGE len=1493 sha=82f884bf]", None),
            ("completed", "[REDACTED_LAST_AGENT_MESSAGE len=5189 sha=2cc6af83]", None),
        ],
    ),
    "codex-0.104.0-alpha.1-desktop-unfinished.jsonl": (
        "0.104.0-alpha.1",
        "working",
        [("open", None, None)],
    ),
    "codex-0.58.0-legacy-inprogress.jsonl": ("0.58.0", "working", [("open", None, None)]),
}


GROUND_TRUTH = {**OWN_TRUTH, **CORPUS_TRUTH}
CASES = [pytest.param(name, id=name) for name in sorted(OWN_TRUTH)] + [
    pytest.param(name, id=name, marks=pytest.mark.conformance) for name in sorted(CORPUS_TRUTH)
]
# the unfinished turns: a call without output under approval "on-request" (blocked
# once quiet long enough) and the legacy one under "never" (stays working)
BLOCKED_WHEN_QUIET = {
    "orcr-0.104.0-desktop-unfinished.jsonl",
    "codex-0.104.0-alpha.1-desktop-unfinished.jsonl",
}


def fixture(name: str) -> Path:
    return OWN / name if name in OWN_TRUTH else transcript_fixtures("codex") / name


def test_every_own_fixture_has_ground_truth():
    assert sorted(p.name for p in OWN.glob("*.jsonl")) == sorted(OWN_TRUTH)


@pytest.mark.conformance
def test_every_corpus_fixture_has_ground_truth():
    corpus = transcript_fixtures("codex")
    assert sorted(p.name for p in corpus.glob("*.jsonl")) == sorted(CORPUS_TRUTH)


def test_failed_turns_say_why():
    """response.incomplete, a 500 and response.failed past Codex's retries: each errored
    turn carries Codex's words for it."""
    shapes = summarize(str(OWN / "real-0.171.0-answer-shapes.jsonl"))["turns"]
    assert shapes[4]["error"] == "Incomplete response returned, reason: max_output_tokens"
    errors = summarize(str(OWN / "real-0.171.0-api-errors.jsonl"))["turns"]
    assert [bool(t["error"]) for t in errors] == [False, False, True, True, False]
    assert errors[3]["error"] == "stream disconnected before completion: Overloaded (fake)"


def check(result: dict, name: str) -> None:
    check_summary(result, "codex", GROUND_TRUTH[name])


@pytest.mark.parametrize("name", CASES)
def test_fixture_whole(name):
    result = summarize(str(fixture(name)))
    check(result, name)
    assert set(result) == {"provider", "version", "state", "turns"}


def feed_in_chunks(data: bytes, cuts: list[int]) -> dict:
    return _feed_in_chunks(CodexProvider(), data, cuts)


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fixture_in_random_chunks_matches_whole_read(name, data):
    raw = fixture(name).read_bytes()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=15))
    assert feed_in_chunks(raw, cuts) == summarize(str(fixture(name)))


@pytest.mark.parametrize("name", CASES)
def test_fixture_cut_in_the_middle_of_every_line(name):
    raw = fixture(name).read_bytes()
    assert feed_in_chunks(raw, cuts_mid_line(raw, 5)) == summarize(str(fixture(name)))


@pytest.mark.parametrize("name", CASES)
def test_fixture_live_reader(name, tmp_path):
    """The live reader with its defaults agrees, except that the unfinished 0.104
    file (approval on-request, a call without output, silent for a day) shows the
    labelled blocked guess; the 0.58 file has approval "never", so it stays working."""
    path = quiet_copy(fixture(name), tmp_path / name)
    state = summary("codex", CodexProvider().open_reader(str(path)).poll())
    if name in BLOCKED_WHEN_QUIET:
        assert state["state"] == "blocked"
        state["state"] = "working"
    check(state, name)


@pytest.mark.parametrize("name", CASES)
def test_fixture_freshly_written_live_reader(name, tmp_path):
    """Just written (no quiet yet), task events alone decide: same as the whole read."""
    clock = FakeClock()
    path = tmp_path / name
    path.write_bytes(fixture(name).read_bytes())
    state = CodexProvider().open_reader(str(path), clock=clock, wall=clock).poll()
    check(summary("codex", state), name)


class TestCodexConformance(ProviderSuite):
    """The provider suite (orcr_testing.conformance), run as a third party's provider
    runs it, on orcr's own Codex fixtures and two of its captured screens."""

    provider = CodexProvider
    fixtures = OWN
    truth = OWN_TRUTH
    launch_options = {"argv": ["codex"]}
    screens = {"0.171.0-booting.txt": "unknown", "0.171.0-ready.txt": "ready"}
