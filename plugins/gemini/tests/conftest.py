import pytest

from orcr_core.kit.testing import FakeClock, Transcript


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def session(tmp_path):
    return Transcript(tmp_path / "session-2026-12-01T23-43-11111111.jsonl")
