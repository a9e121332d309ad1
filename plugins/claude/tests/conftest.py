import pytest

from orcr_core.kit.testing import FakeClock, Transcript


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def transcript(tmp_path):
    return Transcript(tmp_path / "session.jsonl")
