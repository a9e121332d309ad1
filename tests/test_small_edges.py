"""Small edges a new user met (issue 38 part 7): each output and error says what it
means, with the real CLI against a real server."""

from __future__ import annotations


def test_loop_ls_with_no_loops_says_so(server):
    """Planted: the empty branch removed -> stdout is empty, fails."""
    r = server.run("loop", "ls", check=True)
    assert r.stdout.strip() == "no loops (--all shows ended ones)"
    assert server.run("loop", "ls", "--all", check=True).stdout.strip() == "no loops"
    assert server.run("loop", "ls", "--json", check=True).stdout.strip() == "[]"


def test_a_negative_cron_field_is_a_cadence_error_not_an_option(server):
    """Planted: every word starting with '-' taken as an option -> "no such option:
    -1 * * * *", fails."""
    r = server.run("loop", "create", "x", "-1 * * * *", "--", "true")
    assert r.returncode == 1, r.stderr
    assert "the minute field '-1' is not valid (allowed: 0-59)" in r.stderr
    assert "no such option" not in r.stderr
    r = server.run("loop", "create", "x", "0 9 * * *", "--bogus", "--", "true")
    assert r.returncode == 2 and "no such option: --bogus" in r.stderr
