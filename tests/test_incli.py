"""``OrcrHome.run`` runs the CLI's fast path in the test's own process while a server
listens (orcr_testing/incli.py): what it returns must be what a CLI process returns,
exit code, stdout and stderr, or every test that asserts on the CLI through it asserts
on something else. Planted: the in-process run dropping stderr -> the failure rows
differ -> fails; not restoring the worker's environment -> the last check fails."""

from __future__ import annotations

import os

import pytest

from orcr_core.kit.testing import until

CALLS = [
    ("agent", "run", "-p", "testp", "--path", "c/a", "hello"),
    ("agent", "ls", "c/"),
    ("agent", "ls", "--json"),
    ("agent", "get", "c/a", "--json"),
    ("agent", "read", "c/a"),
    ("agent", "get", "c/nobody"),  # failures: their exit codes and their words
    ("agent", "wait", "c/a", "--timeout", "0.5s"),
    ("agent", "wait", "c/nobody", "--timeout", "1s"),
    ("agent", "kill", "c/a", "--json"),
    ("config", "get", "concurrency.max"),  # click's path, run here too
    ("config", "set", "concurrency.max", "0"),  # refused: its words and exit code
    ("config", "get", "no.such.key"),
    ("server", "status", "--json"),
]


def _same(out: str, home) -> str:
    return out.replace(str(home.path), "<home>")


@pytest.mark.parametrize("call", CALLS, ids=lambda c: " ".join(c[:3]))
def test_a_call_in_this_process_returns_what_the_process_returns(orcr_home, call):
    orcr_home.start_server()
    if call[1] != "run":
        orcr_home.run(*CALLS[0], check=True)  # the test driver keeps it working
        until(lambda: orcr_home.get("c/a")["status"] == "working", what="c/a working")
    env_before = dict(os.environ)
    here = orcr_home.run(*call)
    assert dict(os.environ) == env_before  # the worker's environment is back
    if call[1] in ("run", "kill", "status"):  # not idempotent, or times and memory in it
        assert here.returncode == 0 and here.stdout.strip(), here.stderr
        return
    there = orcr_home.run(*call, process=True)
    assert (here.returncode, _same(here.stdout, orcr_home), _same(here.stderr, orcr_home)) == (
        there.returncode,
        _same(there.stdout, orcr_home),
        _same(there.stderr, orcr_home),
    )


def test_only_a_listening_server_and_the_fast_path_run_here(orcr_home, monkeypatch):
    """No server: a process (it autostarts one with the home's environment); an
    argument list the fast path declines (click's help): a process."""
    from orcr_testing import incli

    assert not orcr_home.listening()  # nothing listens: run() starts a process
    orcr_home.start_server()
    assert orcr_home.listening()
    assert incli.in_process(orcr_home.env, ["agent", "ls", "--help"]) is None
    res = incli.in_process(orcr_home.env, ["agent", "ls"])
    assert res is not None and res.returncode == 0
    monkeypatch.setenv("ORCR_TEST_CLI_PROCESS", "1")
    assert incli.in_process(orcr_home.env, ["agent", "ls"]) is None
