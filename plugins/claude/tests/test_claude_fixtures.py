"""Every Claude fixture against its SOURCES.md ground truth, whole and in chunks."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orcr_claude import ClaudeProvider, summarize

from orcr_core.testing import FakeClock, transcript_fixtures
from orcr_core.testing import feed_in_chunks as _feed_in_chunks

FIXTURES = transcript_fixtures("claude")

# file -> (version, final state, [(status, first 200 code points of final text, full length)])
GROUND_TRUTH = {
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


def test_every_fixture_has_ground_truth():
    assert sorted(p.name for p in FIXTURES.glob("*.jsonl")) == sorted(GROUND_TRUTH)


def check(result: dict, name: str) -> None:
    version, state, turns = GROUND_TRUTH[name]
    assert result["provider"] == "claude"
    assert result["version"] == version
    assert result["state"] == state
    assert [t["status"] for t in result["turns"]] == [t[0] for t in turns]
    for got, (_, head, length) in zip(result["turns"], turns, strict=True):
        if head is None:
            assert got["final_text"] is None
        else:
            assert got["final_text"][:200] == head
            assert len(got["final_text"]) == length


@pytest.mark.parametrize("name", sorted(GROUND_TRUTH))
def test_fixture_whole(name):
    result = summarize(str(FIXTURES / name))
    check(result, name)
    assert set(result) == {"provider", "version", "state", "turns"}
    assert all(set(t) == {"status", "final_text"} for t in result["turns"])


def feed_in_chunks(data: bytes, cuts: list[int]) -> dict:
    return _feed_in_chunks(ClaudeProvider(), data, cuts)


@pytest.mark.parametrize("name", sorted(GROUND_TRUTH))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fixture_in_random_chunks_matches_whole_read(name, data):
    raw = (FIXTURES / name).read_bytes()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=15))
    assert feed_in_chunks(raw, cuts) == summarize(str(FIXTURES / name))


@pytest.mark.parametrize("name", sorted(GROUND_TRUTH))
def test_fixture_cut_in_the_middle_of_every_line(name):
    raw = (FIXTURES / name).read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(raw) if b == 0x0A]
    cuts = [s + 7 for s in starts if s + 7 < len(raw)]
    assert feed_in_chunks(raw, cuts) == summarize(str(FIXTURES / name))


def test_fixture_byte_by_byte():
    name = "claude-2.1.233-print-hook.jsonl"
    raw = (FIXTURES / name).read_bytes()
    assert feed_in_chunks(raw, list(range(len(raw)))) == summarize(str(FIXTURES / name))


@pytest.mark.parametrize("name", sorted(GROUND_TRUTH))
def test_fixture_live_reader(name):
    """The live reader with its defaults: the fixtures' old mtimes make them quiet,
    so it agrees with the whole read at once."""
    state = ClaudeProvider().open_reader(str(FIXTURES / name)).poll()
    check(
        {
            "provider": "claude",
            "version": state.version,
            "state": state.state,
            "turns": [{"status": t.status, "final_text": t.final_text} for t in state.turns],
        },
        name,
    )


@pytest.mark.parametrize("name", sorted(GROUND_TRUTH))
def test_fixture_freshly_written_is_provisional_until_settled(name, tmp_path):
    """Written just now, a text-only last answer waits for the settle period."""
    clock = FakeClock()
    path = tmp_path / name
    path.write_bytes((FIXTURES / name).read_bytes())
    reader = ClaudeProvider().open_reader(str(path), clock=clock, wall=clock)
    first = reader.poll()
    clock.advance(3.0)
    settled = reader.poll()
    assert [t.status for t in settled.turns] == [t[0] for t in GROUND_TRUTH[name][2]]
    if name == "claude-1.0.98-init.jsonl":  # stop_reason end_turn: 0.5 s would do
        assert first.state == "working" and first.turns[-1].status == "open"
