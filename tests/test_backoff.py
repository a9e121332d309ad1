"""orcr_core.common.backoff: the one backoff every retry loop uses (issue 34 item 7).

The loops' delays, caps and give-up times were each written out by hand before;
these pin the sequence they all relied on, so a loop that switched to Backoff
waits exactly what it waited before.
"""

from __future__ import annotations

import pytest

from orcr_core.common.backoff import Backoff


def test_delays_double_from_first_up_to_cap_and_reset_starts_over():
    """Planted: no doubling (delay stays first) -> fails; cap ignored -> fails;
    reset a no-op -> fails."""
    b = Backoff(0.05, 2.0)
    assert [b.next() for _ in range(8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    b.reset()
    assert b.next() == 0.05
    # the multiplexer's restart backoff: first retry after 0.25 s, at most 5 s
    m = Backoff(0.25, 5.0)
    assert [m.next() for _ in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_after_counts_failures_like_the_outbox_did():
    """The notification outbox keeps its attempt count in the store:
    ``min(1 * 2**attempts, 300)``. Planted: off by one (2**(n+1)) -> fails."""
    b = Backoff(1.0, 300.0)
    assert [b.after(n) for n in range(10)] == [min(2.0**n, 300.0) for n in range(10)]
    assert b.after(10_000) == 300.0  # no float overflow for a long-dead sink


def test_expired_only_after_give_up_after_seconds_on_its_clock():
    """Planted: expired compares with >= / ignores the clock -> fails."""
    now = [100.0]
    b = Backoff(0.05, 2.0, give_up_after=30.0, clock=lambda: now[0])
    assert not b.expired()
    now[0] = 130.0
    assert not b.expired()  # strictly after, as the loops' `monotonic() > give_up`
    now[0] = 130.01
    assert b.expired()
    assert not Backoff(0.05, 2.0, clock=lambda: 1e12).expired()  # no give-up: never


@pytest.mark.parametrize("first, cap", [(0, 1.0), (-1, 1.0), (2.0, 1.0)])
def test_bad_bounds_are_refused_with_what_was_given(first, cap):
    with pytest.raises(ValueError, match=f"first={first} cap={cap}"):
        Backoff(first, cap)
