"""Provider version specifiers (orcr_core.kit.versions): clauses joined by commas must all
hold; ``||`` joins alternatives of which one must hold (a pin that leaves out a
known-bad stretch of releases, as the Claude adapter's does)."""

from __future__ import annotations

import pytest

from orcr_core.contracts import ProviderError
from orcr_core.kit.versions import check_version, matches

GAP = ">=2.0,<2.1.200 || >=2.1.276,<2.2"


@pytest.mark.parametrize(
    ("version", "inside"),
    [
        ("1.0.98", False),
        ("2.0.0", True),
        ("2.1.199", True),
        ("2.1.200", False),
        ("2.1.250", False),
        ("2.1.275", False),
        ("2.1.276", True),
        ("2.1.332", True),
        ("2.2.0", False),
    ],
)
def test_alternatives_leave_a_stretch_out(version, inside):
    assert matches(GAP, version) is inside


def test_commas_still_need_every_clause():
    assert matches(">=0.104,<0.172", "0.171.0")
    assert not matches(">=0.104,<0.172", "0.172.0")
    assert matches("", "9.9.9")


def test_a_version_in_the_gap_is_refused_or_warned_naming_the_pin():
    with pytest.raises(ProviderError) as err:
        check_version("claude", GAP, "2.1.250", {})
    assert GAP in str(err.value) and "2.1.250" in str(err.value)
    warning = check_version("claude", GAP, "2.1.250", {"allow_unpinned": True})
    assert warning.startswith("warning:") and "2.1.250" in warning


def test_a_clause_without_an_operator_is_refused_naming_it_and_what_is_allowed():
    """Planted: the unchecked re.match(...).groups() back -> AttributeError, fails."""
    with pytest.raises(ValueError, match=r"'2\.0' in '2\.0,<3' is not allowed; use >=, <="):
        matches("2.0,<3", "2.5.0")
