"""Launch argv and env, the session pointer, the database location, resume, version
pinning, registration and ``orcr plugins``."""

import json
import os

import orcr_opencode
import pytest
from orcr_opencode import OpenCodeProvider, summarize

from orcr_core.contracts import LaunchSpec, Provider, ProviderError, SessionPointer


def spec(tmp_path, options=None):
    return LaunchSpec(uuid="u-1", path="a/b", cwd="/w", data_dir=str(tmp_path),
                      options=options or {})  # fmt: skip


def test_is_a_provider_registered_through_the_hook():
    p = OpenCodeProvider()
    assert isinstance(p, Provider)
    assert (p.name, p.has_transcript) == ("opencode", True)
    got = []
    orcr_opencode.register_providers(got.append)
    assert [type(x) for x in got] == [OpenCodeProvider]


def test_launch_argv_env_and_the_session_pointer(tmp_path):
    p = OpenCodeProvider()
    assert p.launch_argv(spec(tmp_path)) == ["opencode"]
    opts = {"argv": ["/opt/oc"], "model": "fake/fake-chat", "extra_args": ["--agent", "plan"]}
    assert p.launch_argv(spec(tmp_path, opts)) == [
        "/opt/oc", "--model", "fake/fake-chat", "--agent", "plan",
    ]  # fmt: skip
    db = str(tmp_path / "opencode.db")
    assert p.launch_env(spec(tmp_path)) == {"OPENCODE_DB": db, "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    env = p.launch_env(spec(tmp_path, {"autoupdate": True, "config": "~/oc.json"}))
    assert env == {"OPENCODE_DB": db, "OPENCODE_CONFIG": os.path.expanduser("~/oc.json")}
    assert p.launch_session(spec(tmp_path)) == SessionPointer("orcr", "path", db)
    with pytest.raises(ProviderError, match="providers.opencode.config"):
        p.launch_env(spec(tmp_path, {"config": 3}))


def test_the_transcript_is_the_wal_while_opencode_runs_else_the_database(store, tmp_path):
    p = OpenCodeProvider()
    pointer = p.launch_session(spec(tmp_path))
    store.add_session()
    assert p.locate_transcript(pointer, spec(tmp_path)) == store.wal
    store.conn.close()  # the last connection: SQLite folds the WAL in and removes it
    assert p.locate_transcript(pointer, spec(tmp_path)) == str(store.path)
    other = tmp_path / "elsewhere"
    assert p.locate_transcript(p.launch_session(spec(other)), spec(other)) is None


def test_resume_reopens_the_agents_session(store, tmp_path):
    p = OpenCodeProvider()
    pointer = p.launch_session(spec(tmp_path))
    assert p.resume_argv(spec(tmp_path), pointer) == ["opencode", "--continue"]  # no session yet
    store.add_session("ses_first")
    store.add_session("ses_child", parent="ses_first")
    assert p.resume_argv(spec(tmp_path, {"model": "f/m"}), pointer) == [
        "opencode", "--model", "f/m", "--session", "ses_first",
    ]  # fmt: skip


def test_versions_outside_the_pin_are_refused_naming_the_range():
    p = OpenCodeProvider()
    assert p.check_version("1.18.33", {}) is None
    assert p.check_version(None, {}) is None
    for bad in ("1.17.9", "1.19.0", "0.15.2"):
        with pytest.raises(ProviderError, match=r"==1\.18\.\*") as exc:
            p.check_version(bad, {})
        assert exc.value.code == "unsupported_provider_version"
    assert "1.19.0" in p.check_version("1.19.0", {"allow_unpinned": True})


def test_orcr_plugins_lists_it_with_its_range(orcr_home):
    rows = json.loads(orcr_home.run("plugins", "--json", check=True).stdout)
    row = next(r for r in rows if r["name"] == "opencode")
    assert row["providers"] == ["opencode"]
    assert row["supported_versions"] == {"opencode": "==1.18.*"}
    text = orcr_home.run("plugins", check=True).stdout
    assert "opencode 0.1.0 (orcr)\n  providers: opencode (==1.18.*)\n" in text


def test_provider_parse_reads_a_database(store, tmp_path):
    store.add_session()
    store.answer(store.prompt("hello"), "Hi there")
    got = summarize(store.wal)
    assert (got["provider"], got["version"], got["state"]) == ("opencode", "1.18.33", "idle")
    assert got["turns"] == [{"status": "completed", "final_text": "Hi there", "error": None}]
    with pytest.raises(ProviderError, match="no OpenCode database"):
        summarize(str(tmp_path / "none.db"))
