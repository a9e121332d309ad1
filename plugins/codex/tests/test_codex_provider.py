"""Launch argv, session pointer, rollout location, version pinning, registration."""

import json
import os
import time

import orcr_codex
import pytest
from orcr_codex import CodexProvider, summarize

from orcr_core.contracts import (
    LaunchSpec,
    Provider,
    ProviderError,
    SessionPointer,
    TranscriptReader,
)

THREAD = "019c8a4c-ed82-79a1-aa28-7738fc5ab61a"


def spec(options=None):
    return LaunchSpec(uuid="u-1", path="a/b", cwd="/w", data_dir="/tmp/x", options=options or {})


def write_rollout(path, thread=THREAD):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"type": "session_meta", "payload": {"id": thread}}) + "\n")
    return path


def test_is_a_provider():
    p = CodexProvider()
    assert isinstance(p, Provider)
    assert (p.name, p.has_transcript) == ("codex", True)
    assert isinstance(p.open_reader("/nonexistent"), TranscriptReader)


def test_registers_through_the_hook():
    got = []
    orcr_codex.register_providers(got.append)
    assert [type(p) for p in got] == [CodexProvider]


def test_launch_argv():
    import json
    import sys

    notify = ["-c", "notify=" + json.dumps(
        [sys.executable, "-m", "orcr_core.cli", "internal", "codex-notify"]
    )]  # fmt: skip
    # no managed app-server daemon of the agent's own (it would outlive the agent)
    no_daemon = ["-c", "features.daemon_auto_start=false"]
    assert CodexProvider().launch_argv(spec()) == ["codex", *no_daemon, *notify]
    assert CodexProvider().launch_argv(spec({"notify": False})) == ["codex", *no_daemon]
    opts = {"argv": ["/opt/codex"], "model": "gpt-5.3-codex", "extra_args": ["-a", "never"]}
    assert CodexProvider().launch_argv(spec(opts)) == [
        "/opt/codex", *no_daemon, *notify, "--model", "gpt-5.3-codex", "-a", "never",
    ]  # fmt: skip
    resume = CodexProvider().resume_argv(spec(opts), SessionPointer("orcr", "id", THREAD))
    assert resume[:3] == ["/opt/codex", "resume", THREAD] and resume[3:5] == no_daemon
    # the notify value is a TOML array Codex can parse
    import tomllib

    assert tomllib.loads(notify[1])["notify"][-1] == "codex-notify"


def test_launch_argv_refuses_bad_options():
    with pytest.raises(ProviderError):
        CodexProvider().launch_argv(spec({"extra_args": [1, 2]}))


def test_launch_session_is_unknown_up_front():
    assert CodexProvider().launch_session(spec()) is None


def test_locate_transcript_in_dated_dirs(tmp_path):
    pointer = SessionPointer("herdr:codex", "id", THREAD)
    opts = {"home": str(tmp_path)}
    assert CodexProvider().locate_transcript(pointer, spec(opts)) is None
    target = write_rollout(
        tmp_path / "sessions/2026/02/23" / f"rollout-2026-02-23T12-40-23-{THREAD}.jsonl"
    )
    write_rollout(
        tmp_path / "sessions/2026/02/23" / "rollout-2026-02-23T12-41-00-other.jsonl", "other"
    )
    assert CodexProvider().locate_transcript(pointer, spec(opts)) == str(target)


def test_locate_transcript_uses_codex_home_and_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    target = write_rollout(
        tmp_path / "archived_sessions" / f"rollout-2026-01-01T00-00-00-{THREAD}.jsonl"
    )
    pointer = SessionPointer("herdr:codex", "id", THREAD)
    assert CodexProvider().locate_transcript(pointer, spec()) == str(target)


def test_locate_transcript_skips_a_file_naming_another_thread(tmp_path):
    write_rollout(
        tmp_path / "sessions/2026/02/23" / f"rollout-x-{THREAD}.jsonl", thread="someone-else"
    )
    pointer = SessionPointer("herdr:codex", "id", THREAD)
    assert CodexProvider().locate_transcript(pointer, spec({"home": str(tmp_path)})) is None


def test_locate_transcript_by_path(tmp_path):
    f = tmp_path / "r.jsonl"
    pointer = SessionPointer("herdr:codex", "path", str(f))
    assert CodexProvider().locate_transcript(pointer, spec()) is None
    f.write_text("")
    assert CodexProvider().locate_transcript(pointer, spec()) == str(f)


def test_version_pinning():
    p = CodexProvider()
    for ok in ("0.104.0-alpha.1", "0.128.0", "0.155.1", "0.159.3", "0.169.0", "0.171.0", None):
        assert p.check_version(ok, {}) is None
    for bad in ("0.58.0", "0.103.9", "0.172.0", "1.0.0"):
        with pytest.raises(ProviderError) as err:
            p.check_version(bad, {})
        assert err.value.code == "unsupported_provider_version" and bad in str(err.value)
    assert "0.58.0" in p.check_version("0.58.0", {"allow_unpinned": True})


def test_summarize_missing_file(tmp_path):
    with pytest.raises(ProviderError):
        summarize(os.path.join(tmp_path, "nope.jsonl"))


def test_resume_argv_puts_the_resume_subcommand_after_the_program():
    from orcr_core.contracts import SessionPointer

    pointer = SessionPointer(source="herdr:codex", kind="id", value="thr-1")
    opts = {"argv": ["env", "X=1", "codex"], "notify": False, "model": "o3"}
    launch = CodexProvider().launch_argv(spec(opts))
    assert CodexProvider().resume_argv(spec(opts), pointer) == [
        "env", "X=1", "codex", "resume", "thr-1", *launch[3:],
    ]  # fmt: skip
    assert launch[3:][-2:] == ["--model", "o3"]  # the launch flags follow the thread id


def _rollout_with(root, thread, cwd, prompt, **meta):
    day = root / "sessions" / time.strftime("%Y/%m/%d")
    day.mkdir(parents=True, exist_ok=True)
    lines = [
        {"type": "session_meta", "payload": {"id": thread, "cwd": cwd, **meta}},
        {"type": "response_item", "payload": {"type": "message", "role": "user",
                                              "content": [{"type": "input_text", "text": prompt}]}},
    ]  # fmt: skip
    path = day / f"rollout-2026-11-30T10-00-00-{thread}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_find_session_by_the_prompt(tmp_path):
    """A thread notify never reported is found by its rollout: the agent's cwd, the
    prompt, a user thread, not another agent's, written since the agent started."""
    opts = {"home": str(tmp_path)}
    since = time.time() - 5
    p = CodexProvider()
    assert p.find_session(spec(opts), "fix it", since) is None
    _rollout_with(tmp_path, "t-other-cwd", "/elsewhere", "fix it")
    _rollout_with(tmp_path, "t-other-prompt", "/w", "something else")
    _rollout_with(tmp_path, "t-sub", "/w", "fix it", thread_source="subagent",
                  parent_thread_id="t-main")  # fmt: skip
    assert p.find_session(spec(opts), "fix it", since) is None
    _rollout_with(tmp_path, "t-main", "/w", "fix it")
    found = p.find_session(spec(opts), "fix it", since)
    assert found == SessionPointer("orcr:rollout", "id", "t-main")
    assert p.find_session(spec(opts), "fix it", since, taken={"t-main"}) is None
    assert p.find_session(spec(opts), "fix it", time.time() + 60) is None  # older than the agent


def test_find_session_matches_the_whole_prompt(tmp_path):
    """``hello 1`` is not the rollout of ``hello 10`` (issue 33 item 7: the substring
    match gave fleet/c1 another agent's thread). Planted: ``needle in head`` back in
    find_session -> fails."""
    opts = {"home": str(tmp_path)}
    since = time.time() - 5
    p = CodexProvider()
    _rollout_with(tmp_path, "t-ten", "/w", "hello 10")
    _rollout_with(tmp_path, "t-x", "/w", "say hello 1")
    assert p.find_session(spec(opts), "hello 1", since) is None
    _rollout_with(tmp_path, "t-one", "/w", "hello 1\n")  # kept as typed, newline and all
    assert p.find_session(spec(opts), "hello 1", since).value == "t-one"
    assert p.find_session(spec(opts), " hello 10 ", since, taken={"t-one"}).value == "t-ten"
