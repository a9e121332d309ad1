"""Launch argv, session pointer, transcript location, version pinning, registration."""

import orcr_claude
import pytest
from orcr_claude import ClaudeProvider, summarize
from orcr_claude import provider as provider_module
from orcr_claude.slug import base36, java_hash, project_slug

from orcr_core.contracts import LaunchSpec, Provider, ProviderError, SessionPointer

UUID = "0b3e2f4e-4f63-4d4a-9d7e-1c2b3a4d5e6f"


def spec(options=None, cwd="/work/proj"):
    return LaunchSpec(uuid=UUID, path="a/b", cwd=cwd, data_dir="/tmp/x", options=options or {})


def test_is_a_provider():
    p = ClaudeProvider()
    assert isinstance(p, Provider)
    assert (p.name, p.has_transcript) == ("claude", True)


def test_registers_through_the_hook():
    got = []
    orcr_claude.register_providers(got.append)
    assert [type(p) for p in got] == [ClaudeProvider]


def test_launch_argv_default():
    from orcr_claude.provider import STOP_HOOK_SETTINGS

    assert ClaudeProvider().launch_argv(spec()) == [
        "claude", "--session-id", UUID, "--settings", STOP_HOOK_SETTINGS,
    ]  # fmt: skip
    assert ClaudeProvider().launch_argv(spec({"stop_hook": False})) == [
        "claude",
        "--session-id",
        UUID,
    ]


def test_launch_argv_with_options():
    from orcr_claude.provider import STOP_HOOK_SETTINGS

    opts = {
        "argv": ["/opt/bin/claude", "--verbose"],
        "model": "opus",
        "extra_args": ["--permission-mode", "bypassPermissions", "--append-system-prompt", "a b"],
    }
    assert ClaudeProvider().launch_argv(spec(opts)) == [
        "/opt/bin/claude", "--verbose", "--session-id", UUID, "--settings", STOP_HOOK_SETTINGS,
        "--model", "opus",
        "--permission-mode", "bypassPermissions", "--append-system-prompt", "a b",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "opts",
    [{"argv": []}, {"argv": [1]}, {"extra_args": 5}, {"model": 3}],
)
def test_launch_argv_refuses_bad_options(opts):
    with pytest.raises(ProviderError) as err:
        ClaudeProvider().launch_argv(spec(opts))
    assert err.value.code == "bad_provider_option"


def test_launch_argv_refuses_a_non_uuid():
    bad = LaunchSpec(uuid="not-a-uuid", path="a", cwd="/", data_dir="/tmp")
    with pytest.raises(ProviderError, match="UUID"):
        ClaudeProvider().launch_argv(bad)


def test_launch_session_is_the_agent_uuid():
    assert ClaudeProvider().launch_session(spec()) == SessionPointer("orcr", "id", UUID)


def test_locate_transcript_globs_projects(tmp_path):
    pointer = SessionPointer("orcr", "id", UUID)
    opts = {"home": str(tmp_path)}
    assert ClaudeProvider().locate_transcript(pointer, spec(opts)) is None  # not created yet
    moved = tmp_path / "projects" / "-somewhere-else"  # e.g. a worktree moved
    moved.mkdir(parents=True)
    (moved / f"{UUID}.jsonl").write_text("")
    (moved / "other.jsonl").write_text("")
    assert ClaudeProvider().locate_transcript(pointer, spec(opts)) == str(moved / f"{UUID}.jsonl")


def test_locate_transcript_uses_claude_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg[1]"))  # glob chars in the root
    target = tmp_path / "cfg[1]" / "projects" / "-work-proj" / f"{UUID}.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("")
    pointer = SessionPointer("orcr", "id", UUID)
    assert ClaudeProvider().locate_transcript(pointer, spec()) == str(target)


def test_locate_transcript_falls_back_to_the_slug(tmp_path, monkeypatch):
    cwd = "/Users/a.b/My_proj"
    target = tmp_path / "projects" / "-Users-a-b-My-proj" / f"{UUID}.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("")
    monkeypatch.setattr(provider_module.glob, "glob", lambda pattern: [])
    pointer = SessionPointer("orcr", "id", UUID)
    got = ClaudeProvider().locate_transcript(pointer, spec({"home": str(tmp_path)}, cwd=cwd))
    assert got == str(target)


def test_locate_transcript_by_path(tmp_path):
    f = tmp_path / "x.jsonl"
    pointer = SessionPointer("herdr:claude", "path", str(f))
    assert ClaudeProvider().locate_transcript(pointer, spec()) is None
    f.write_text("")
    assert ClaudeProvider().locate_transcript(pointer, spec()) == str(f)


# Vectors computed with the JavaScript rule of TRANSCRIPTS.md 1.1 (node).
@pytest.mark.parametrize(
    ("cwd", "slug"),
    [
        ("/Users/a.b/My_proj", "-Users-a-b-My-proj"),
        ("C:\\x", "C--x"),
        ("/a/😀b", "-a---b"),  # a non-BMP character is two UTF-16 units
        ("/srv/" + "a" * 195, "-srv-" + "a" * 195),  # exactly 200: no hash
        ("/srv/" + "a" * 196, "-srv-" + "a" * 195 + "-c8xgnb"),
        ("/w/" + "😀" * 120, "-w-" + "-" * 197 + "-vuzjip"),
        ("/data/" + "Proj_" * 41, ("-data-" + "Proj-" * 41)[:200] + "-mth2gk"),
    ],
)
def test_project_slug(cwd, slug):
    assert project_slug(cwd) == slug


def test_java_hash_and_base36():
    assert java_hash("hello") == 99162322
    assert java_hash("polygenelubricants") == -(2**31)
    assert base36(abs(java_hash("polygenelubricants"))) == "zik0zk"
    assert base36(0) == "0" and base36(35) == "z" and base36(36) == "10"


def test_version_pinning():
    p = ClaudeProvider()
    for ok in ("2.0.0", "2.0.28", "2.1.38", "2.1.199", "2.1.276", "2.1.332", None):
        assert p.check_version(ok, {}) is None
    # 1.0.x resumes into a new session file (real_cli tier, 1.0.98 and 1.0.128);
    # 2.1.200-2.1.275 were seen writing a turn's answer before its prompt
    for bad in ("1.0.98", "1.0.128", "2.1.200", "2.1.233", "2.1.275", "2.2.0", "3.0.1"):
        with pytest.raises(ProviderError) as err:
            p.check_version(bad, {})
        assert err.value.code == "unsupported_provider_version"
        assert bad in str(err.value) and p.supported_versions in str(err.value)
    warning = p.check_version("2.2.0", {"allow_unpinned": True})
    assert warning.startswith("warning:") and "2.2.0" in warning
    warning = p.check_version("1.0.98", {"allow_unpinned": True})
    assert warning.startswith("warning:") and "1.0.98" in warning


def test_summarize_missing_file(tmp_path):
    with pytest.raises(ProviderError) as err:
        summarize(str(tmp_path / "nope.jsonl"))
    assert err.value.code == "transcript_unreadable"


def test_summarize_empty_file(tmp_path):
    f = tmp_path / "e.jsonl"
    f.write_text("")
    assert summarize(str(f)) == {
        "provider": "claude",
        "version": None,
        "state": "unknown",
        "turns": [],
    }


def test_reader_is_a_transcript_reader(tmp_path):
    from orcr_core.contracts import TranscriptReader

    assert isinstance(ClaudeProvider().open_reader(str(tmp_path / "x")), TranscriptReader)


def test_resume_argv_continues_the_recorded_session():
    from orcr_claude.provider import STOP_HOOK_SETTINGS

    pointer = SessionPointer(source="orcr", kind="id", value=UUID)
    opts = {"model": "opus", "extra_args": ["--verbose"], "stop_hook": True}
    argv = ClaudeProvider().resume_argv(spec(opts), pointer)
    assert argv == [
        "claude", "--resume", UUID, "--settings", STOP_HOOK_SETTINGS, "--model", "opus",
        "--verbose",
    ]  # fmt: skip
    assert "--session-id" not in argv  # a new session would lose the conversation
