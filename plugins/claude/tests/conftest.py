from pathlib import Path

import pytest

from orcr_core.testing import FakeClock, Transcript, transcript_fixtures


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def transcript(tmp_path):
    return Transcript(tmp_path / "session.jsonl")


@pytest.fixture(scope="session")
def claude_fixtures() -> Path:
    return transcript_fixtures("claude")
