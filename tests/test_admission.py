"""agent run: validation, path grammar, races, scope, launch.json."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import pytest

from orcr_core import paths


@pytest.mark.parametrize(
    "bad, words",
    [
        ("", "empty"),
        ("Review/x", "'R'"),
        ("a//b", "empty segment"),
        # a leading '/' is a file-path habit: say it has no root and what to write
        # (planted: the check removed -> "has an empty segment", both fail)
        ("a/b/", "ends with '/'"),
        ("/abs/x", "starts with '/': an orcr path is a name, not a file path"),
        ("/abs/x", "a leading / means 'from the top' only in a TARGET"),
        ("/abs/x", "write 'abs/x'"),
        ("a-b", "'-'"),
        ("a b", "' '"),
        ("a.b", "'.'"),
        ("/".join(["a"] * 9), "over the limit of 8"),
        ("x" * 65, "over 64"),
        ("/".join(["x" * 60] * 5), "over the limit of 255"),
        ("é", "'é'"),
    ],
)
def test_path_grammar_violations_name_the_problem(bad, words):
    with pytest.raises(paths.PathError) as e:
        paths.validate(bad)
    assert words in str(e.value)


def test_cli_refuses_bad_path_and_keeps_nothing(server):
    r = server.run("agent", "run", "--provider", "testp", "--path", "Bad/Path", "hi")
    assert r.returncode == 1
    assert "invalid_path" in r.stderr and "lowercase letters" in r.stderr
    assert server.run("agent", "ls", "--all", "--json", check=True).stdout.strip() == "[]"
    assert list((server.path / "agents").iterdir()) == []


def test_unknown_provider_names_installed_ones(server):
    r = server.run("agent", "run", "--provider", "nope", "--path", "x", "hi")
    assert r.returncode == 1
    assert "unknown provider 'nope'" in r.stderr and "testp" in r.stderr


def test_prompt_from_stdin_and_launch_json_private(server):
    r = server.run(
        "agent",
        "run",
        "--provider",
        "testp",
        "--path",
        "s/one",
        "-",
        input="from stdin\n",
        check=True,
    )
    path, uuid = r.stdout.split()
    launch = server.path / "agents" / uuid / "launch.json"
    assert stat.S_IMODE(launch.stat().st_mode) == 0o600
    data = json.loads(launch.read_text())
    assert data["prompt"] == "from stdin\n" and data["path"] == "s/one"
    assert len(data["launch_token"]) == 32


def test_orcr_path_scopes_the_path(server):
    r = server.run(
        "agent",
        "run",
        "--provider",
        "testp",
        "--path",
        "review/file_1",
        "hi",
        env={"ORCR_PATH": "nightly/r82c9s"},
        check=True,
    )
    assert r.stdout.split()[0] == "nightly/r82c9s/review/file_1"
    r = server.run(
        "agent", "run", "--provider", "testp", "hi", env={"ORCR_PATH": "nightly/r82c9s"}, check=True
    )
    assert r.stdout.split()[0] == "nightly/r82c9s/testp_1"
    r = server.run("agent", "run", "--provider", "testp", "--name", "a/b", "hi")
    assert r.returncode == 1 and "one segment" in r.stderr


def test_path_in_use_then_reusable_after_end(server):
    server.run("agent", "run", "--provider", "testp", "--path", "p/x", "hi", check=True)
    r = server.run("agent", "run", "--provider", "testp", "--path", "p/x", "hi")
    assert r.returncode == 1 and "path_in_use" in r.stderr
    assert len(list((server.path / "agents").iterdir())) == 1  # the loser's data dir is gone
    server.run("agent", "kill", "p/x", check=True)
    # A kill of an agent still starting is a cancel request (the row ends when its start
    # step sees it): the path is free once the row has ended, not when kill returns.
    server.ended("p/x")
    server.run("agent", "run", "--provider", "testp", "--path", "p/x", "hi", check=True)


RACER = r"""
import sys
from orcr_core.sdk.client import Client, ServerError
from orcr_core.sdk import Orcr
with Orcr(Client(autostart=False)) as o:
    sys.stdin.readline()
    try:
        print("won", o.run("go", provider="testp", path="race/x" + sys.argv[1], cwd="/")["uuid"])
    except ServerError as e:
        print("lost", e.code)
"""


def test_two_processes_race_one_path(server):
    for _round in range(5):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, str(_round)],
                env=server.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=30)[0] for p in procs]
        results = sorted(o.split()[0] for o in outs)
        assert results == ["lost", "won"], outs
        assert any("path_in_use" in o for o in outs)


def test_pipelined_admissions_group_commit_and_keep_per_request_errors(server):
    """run_many pipelines requests; the server admits the buffered ones in one
    transaction with a savepoint each: a refused one does not take the others down."""
    import sqlite3

    with server.sdk() as o:
        specs = [dict(prompt="x", provider="testp", path=f"pipe/a{i}", cwd="/") for i in range(300)]
        specs[5]["path"] = "pipe/a4"  # collides with the one before it
        specs[7]["path"] = "Bad"  # refused by the grammar
        specs[9]["provider"] = "nope"
        results = o.run_many(specs)
    assert [r.get("error", {}).get("code") for r in results[4:10]] == [
        None,
        "path_in_use",
        None,
        "invalid_path",
        None,
        "unknown_provider",
    ]
    ok = [r for r in results if "uuid" in r]
    assert len(ok) == 297
    conn = sqlite3.connect(server.path / "store.db")
    rows = dict(conn.execute("SELECT uuid, queue_seq FROM agent").fetchall())
    assert {r["uuid"] for r in ok} == set(rows)  # every success committed, nothing else
    assert [rows[r["uuid"]] for r in ok] == sorted(rows.values())  # FIFO order = request order
    dirs = {p.name for p in (server.path / "agents").iterdir()}
    assert dirs == set(rows)  # refused admissions left no data dir
