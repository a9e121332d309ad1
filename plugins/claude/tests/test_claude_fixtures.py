"""Every Claude fixture against its ground truth, whole and in chunks.

Two sets: orcr's own fixtures (``fixtures/``, written from the documented format,
README.md there says what each exercises, OWN_TRUTH below what it reads as) always run; the third-party corpus
(``shared/fixtures/transcripts/claude``, ground truth in its SOURCES.md) is the
``conformance`` group, run when the corpus is found.
"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orcr_claude import ClaudeProvider, summarize
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

# file -> (version, final state, [(status, first 200 code points of final text, full length)])
OWN_TRUTH = {
    "orcr-2.1.38-split-interrupted.jsonl": ("2.1.38", "idle", [("interrupted", None, None)]),
    "orcr-1.0.98-init-sidechain.jsonl": (
        "1.0.98",
        "idle",
        [
            (
                "completed",
                "I drafted a CLAUDE.md for this empty repository. \n"
                "Grant write access and I will save it.",
                88,
            )
        ],
    ),
    # a real 2.1.332 run: the answer given before the background subagent finished is
    # not the turn's; the one Claude Code gives when woken by its <task-notification> is
    "orcr-2.1.332-background-agent.jsonl": (
        "2.1.332",
        "idle",
        [("completed", "after the helper", 16)],
    ),
    "orcr-2.1.233-hook-two-turns.jsonl": (
        "2.1.233",
        "idle",
        [
            ("completed", "It printed hello.", 17),
            ("completed", "The background job finished cleanly.", 36),
        ],
    ),
    # built from 2.1.332's source (no human prompt between the two turns): idle compaction
    "orcr-2.1.332-idle-compact.jsonl": (
        "2.1.332",
        "idle",
        [
            ("completed", "I read all 412 files.", 21),
            ("completed", "A small CLI with one module.", 28),
        ],
    ),
    # captured from the real Claude Code in the real_cli tier (test_model_variety_claude.py)
    "real-2.1.332-answer-shapes.jsonl": (
        "2.1.332",
        "idle",
        [
            ("completed", "The answer after thinking", 25),
            ("completed", "First block.\nSecond block.", 26),
            ("completed", "The notes say hello.", 20),
            ("completed", "An answer cut at the limit, and its rest.", 41),
            ("completed", "After the refusal.", 18),
            ("completed", None, None),
            ("completed", "Still here.", 11),
        ],
    ),
    "real-2.1.332-api-errors.jsonl": (
        "2.1.332",
        "idle",
        [
            ("completed", "after the overload", 18),
            ("completed", "after the broken stream", 23),
            ("errored", None, None),
            ("completed", "working again", 13),
        ],
    ),
}
CORPUS_TRUTH = {
    "claude-2.1.38-interrupted-short.jsonl": ("2.1.38", "idle", [("interrupted", None, None)]),
    "claude-2.1.38-tool-heavy.jsonl": (
        "2.1.38",
        "idle",
        [("interrupted", None, None), ("interrupted", None, None)],
    ),
    "claude-1.0.98-init.jsonl": (
        "1.0.98",
        "idle",
        [
            (
                "completed",
                "I've created a basic CLAUDE.md file for this empty repository. Since there are no "
                "existing files, configuration, or code structure to analyze, the file provides a "
                "foundation that should be updated as ",
                369,
            )
        ],
    ),
    "claude-2.1.233-print-hook.jsonl": (
        "2.1.233",
        "idle",
        [
            (
                "completed",
                "Yes, I received a mid-run feedback message. The bash command executed successfully "
                'and output "hello".\n\nThe feedback indicated: **Correction token: ZEBRA7739**\n\n'
                "The message stated that a thumbs-down w",
                312,
            )
        ],
    ),
}


GROUND_TRUTH = {**OWN_TRUTH, **CORPUS_TRUTH}
CASES = [pytest.param(name, id=name) for name in sorted(OWN_TRUTH)] + [
    pytest.param(name, id=name, marks=pytest.mark.conformance) for name in sorted(CORPUS_TRUTH)
]


def fixture(name: str) -> Path:
    return OWN / name if name in OWN_TRUTH else transcript_fixtures("claude") / name


def test_every_own_fixture_has_ground_truth():
    assert sorted(p.name for p in OWN.glob("*.jsonl")) == sorted(OWN_TRUTH)


@pytest.mark.conformance
def test_every_corpus_fixture_has_ground_truth():
    corpus = transcript_fixtures("claude")
    assert sorted(p.name for p in corpus.glob("*.jsonl")) == sorted(CORPUS_TRUTH)


def test_an_api_error_turn_says_what_failed():
    turns = summarize(str(OWN / "real-2.1.332-api-errors.jsonl"))["turns"]
    assert [t["error"] is not None for t in turns] == [False, False, True, False]
    assert turns[2]["error"].startswith("API Error: 500 the fake is broken.")


def check(result: dict, name: str) -> None:
    check_summary(result, "claude", GROUND_TRUTH[name])


@pytest.mark.parametrize("name", CASES)
def test_fixture_whole(name):
    result = summarize(str(fixture(name)))
    check(result, name)
    assert set(result) == {"provider", "version", "state", "turns"}
    assert all(set(t) == {"status", "final_text", "error"} for t in result["turns"])


def feed_in_chunks(data: bytes, cuts: list[int]) -> dict:
    return _feed_in_chunks(ClaudeProvider(), data, cuts)


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
    assert feed_in_chunks(raw, cuts_mid_line(raw, 7)) == summarize(str(fixture(name)))


@pytest.mark.parametrize(
    "name",
    [
        "orcr-2.1.233-hook-two-turns.jsonl",
        pytest.param("claude-2.1.233-print-hook.jsonl", marks=pytest.mark.conformance),
    ],
)
def test_fixture_byte_by_byte(name):
    raw = fixture(name).read_bytes()
    assert feed_in_chunks(raw, list(range(len(raw)))) == summarize(str(fixture(name)))


@pytest.mark.parametrize("name", CASES)
def test_fixture_live_reader(name, tmp_path):
    """The live reader with its defaults: a file last written a day ago is quiet,
    so it agrees with the whole read at once."""
    path = quiet_copy(fixture(name), tmp_path / name)
    check(summary("claude", ClaudeProvider().open_reader(str(path)).poll()), name)


@pytest.mark.parametrize("name", CASES)
def test_fixture_freshly_written_is_provisional_until_settled(name, tmp_path):
    """Written just now, a text-only last answer waits for the settle period."""
    clock = FakeClock()
    path = tmp_path / name
    path.write_bytes(fixture(name).read_bytes())
    reader = ClaudeProvider().open_reader(str(path), clock=clock, wall=clock)
    first = reader.poll()
    clock.advance(3.0)
    settled = reader.poll()
    assert [t.status for t in settled.turns] == [t[0] for t in GROUND_TRUTH[name][2]]
    if name in ("claude-1.0.98-init.jsonl", "orcr-1.0.98-init-sidechain.jsonl"):
        # stop_reason end_turn: 0.5 s would do
        assert first.state == "working" and first.turns[-1].status == "open"


class TestClaudeConformance(ProviderSuite):
    """The provider suite (orcr_testing.conformance), run as a third party's provider
    runs it, on orcr's own Claude fixtures."""

    provider = ClaudeProvider
    fixtures = OWN
    truth = OWN_TRUTH
    launch_options = {"argv": ["claude"]}
