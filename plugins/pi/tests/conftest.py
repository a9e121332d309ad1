"""orcr-pi is its own distribution (plugins/pi/pyproject.toml): the main project's
install does not bring it. Its tests need it installed (``pip install ./plugins/pi``;
.ci/run does), except the distribution test, which installs it into a venv of its own; each
other module starts with ``pytest.importorskip("orcr_pi", reason=...)``."""

import pytest

from orcr_core.kit.testing import FakeClock, Transcript


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def session(tmp_path):
    return Transcript(tmp_path / "pi-session.jsonl")
