from pathlib import Path

import pytest

from orcr_core.testing import FakeClock, Transcript, transcript_fixtures


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def rollout(tmp_path):
    return Transcript(tmp_path / "rollout.jsonl")


@pytest.fixture(scope="session")
def codex_fixtures() -> Path:
    return transcript_fixtures("codex")
