"""Launch argv, the session fixed up front, resume, version pinning, the screen,
registration."""

from __future__ import annotations

import json
import os
import stat

import pytest

from orcr_core.contracts import LaunchSpec, Provider, ProviderError, SessionPointer

orcr_pi = pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")
PiProvider = orcr_pi.PiProvider


def fake_pi_package(tmp_path, version, name="@earendil-works/pi-coding-agent", wrapped=False):
    """An npm-installed pi: node_modules/.bin/pi -> the package's dist/cli.js; or
    (``wrapped``) -> <package>/orcr-node/pi, the wrapper scripts/install-provider-clis
    writes when the system node is older than the package wants."""
    pkg = tmp_path / "node_modules" / name
    (pkg / "dist").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": name, "version": version}))
    cli = pkg / "dist" / "cli.js"
    if wrapped:
        (pkg / "orcr-node").mkdir()
        cli = pkg / "orcr-node" / "pi"
    cli.write_text("#!/usr/bin/env node\n")
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    os.symlink(os.path.relpath(cli, bin_dir), bin_dir / "pi")
    return str(bin_dir / "pi")


def spec(tmp_path, **options):
    return LaunchSpec("u-1", "a/b", "/w", str(tmp_path / "data"), options)


def test_is_a_provider_and_registers_through_the_hook():
    p = PiProvider()
    assert isinstance(p, Provider) and (p.name, p.has_transcript) == ("pi", True)
    got = []
    orcr_pi.register_providers(got.append)
    assert [type(x) for x in got] == [PiProvider]


def test_the_session_file_is_fixed_up_front(tmp_path):
    s = spec(tmp_path, argv=["pi"], model="fake/m1", extra_args=["--offline"])
    session = str(tmp_path / "data" / "pi-session.jsonl")
    assert PiProvider().launch_argv(s) == [
        "pi", "--session", session, "--model", "fake/m1", "--offline"
    ]  # fmt: skip
    assert PiProvider().launch_session(s) == SessionPointer("orcr", "path", session)
    assert PiProvider().locate_transcript(PiProvider().launch_session(s), s) is None
    (tmp_path / "data" / "pi-session.jsonl").write_text("")
    assert PiProvider().locate_transcript(PiProvider().launch_session(s), s) == session


def test_resume_is_the_same_session_file(tmp_path):
    s = spec(tmp_path, argv=["pi"])
    pointer = PiProvider().launch_session(s)
    assert PiProvider().resume_argv(s, pointer) == PiProvider().launch_argv(s)
    with pytest.raises(ProviderError, match="resumes the session orcr gave it"):
        PiProvider().resume_argv(s, SessionPointer("orcr", "path", "/elsewhere.jsonl"))


def test_home_is_pis_agent_folder(tmp_path):
    env = PiProvider().launch_env(spec(tmp_path, home="/h/agent"))
    assert env == {"PI_CODING_AGENT_DIR": "/h/agent", "PI_CODING_AGENT_SESSION_DIR": None}


def test_a_pi_outside_the_pin_is_refused_naming_the_range(tmp_path):
    pi = fake_pi_package(tmp_path, "0.80.0")
    with pytest.raises(ProviderError) as exc:
        PiProvider().launch_argv(spec(tmp_path, argv=[pi]))
    assert exc.value.code == "unsupported_provider_version"
    assert "pi 0.80.0" in str(exc.value) and PiProvider.supported_versions in str(exc.value)
    # allow_unpinned: it runs, and the reader reports the version (orcr warns once)
    s = spec(tmp_path, argv=[pi], allow_unpinned=True)
    PiProvider().launch_argv(s)
    (tmp_path / "data" / "pi-session.jsonl").write_text(
        json.dumps({"type": "session", "version": 3, "id": "x", "cwd": "/w"}) + "\n"
    )
    state = PiProvider().open_reader(str(tmp_path / "data" / "pi-session.jsonl")).poll()
    assert state.version == "0.80.0"
    assert PiProvider().check_version("0.80.0", {"allow_unpinned": True}).startswith("warning")


@pytest.mark.parametrize(
    "name, version, wrapped",
    [
        ("@mariozechner/pi-coding-agent", "0.73.1", False),
        ("@earendil-works/pi-coding-agent", "1.6.0", False),
        ("@earendil-works/pi-coding-agent", "1.6.0", True),
    ],
)
def test_a_pi_inside_the_pin_starts(tmp_path, name, version, wrapped):
    """Both package names (pi moved scope after 0.73.1), and the node wrapper's layout.
    Planted: only the old package name known -> the 1.6.0 cases fail."""
    pi = fake_pi_package(tmp_path, version, name, wrapped)
    assert orcr_pi.provider.package_version(pi) == version
    assert PiProvider().launch_argv(spec(tmp_path, argv=[pi]))[0] == pi
    assert (tmp_path / "data" / "pi-version").read_text() == f"{version}\n"
    assert PiProvider().check_version(version, {}) is None


@pytest.mark.parametrize("version", ["0.74.0", "1.5.2", "1.7.0"])
def test_releases_between_and_after_the_checked_ones_are_refused(tmp_path, version):
    pi = fake_pi_package(tmp_path, version)
    with pytest.raises(ProviderError, match=f"pi {version} is outside"):
        PiProvider().launch_argv(spec(tmp_path, argv=[pi]))


def test_a_program_that_is_no_pi_package_passes(tmp_path):
    """A wrapper or a test double: no version known, nothing refused."""
    assert PiProvider().launch_argv(spec(tmp_path, argv=["/bin/sh", "x"]))[:2] == ["/bin/sh", "x"]


READY = """\
 pi v0.73.1
 escape interrupt · ctrl+c/ctrl+d clear/exit · / commands · ! bash · ctrl+o more

────────────────────────────────────────────────────────────────────────────────

────────────────────────────────────────────────────────────────────────────────
/tmp/pi-try/proj
0.0%/200k (auto)                                                     claude-fake
"""


def test_ready_once_the_input_box_is_drawn(tmp_path):
    s = spec(tmp_path)
    assert PiProvider().screen_state(READY, s).state == "ready"
    booting = "fd not found. Offline mode enabled, skipping download.\n"
    assert PiProvider().screen_state(booting, s).state == "unknown"
    half = READY.split("/tmp/pi-try")[0]
    assert PiProvider().screen_state(half, s).state == "unknown"


def test_the_composer_is_the_input_box_and_working_shows_a_turn():
    """pi 0.73.1's input box is the lines between its last two rules; "Working..." (its
    loader, over the box) shows a turn running. orcr presses a prompt's Enter again
    only when the box holds it and nothing runs (orcr_core/agents/resubmit.py)."""
    got = PiProvider().input_state(READY)
    assert (got.composer, got.running) == ("", None)
    rule = "─" * 80
    typed = READY.replace(f"{rule}\n\n{rule}", f"{rule}\nfix the tests\n{rule}")
    assert PiProvider().input_state(typed).composer == "fix the tests"
    working = READY.replace(f"\n{rule}\n\n", f"\n⠋ Working... (escape to interrupt)\n{rule}\n\n", 1)
    assert PiProvider().input_state(working).running == "Working..."
    assert PiProvider().input_state("fd not found.\n").composer is None


#: the errorMessage the real pi 1.6.0 wrote for each failed try of a turn the Anthropic
#: API answered with its 429 for a spent plan (tests/fake_models/limits.py
#: ``anthropic_usage_limit``; captured in tests/real_cli); its screen ended with
#: "Error: Retry failed after 3 attempts: 429 {...}"
PI_LIMIT_ERROR = (
    '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would '
    "exceed your account's rate limit. Please try again later.\"},"
    '"request_id":"req_011CV2fake0limit0reached000"}'
)


def test_a_turn_that_ended_on_a_usage_limit_holds_pi():
    """Planted: LIMIT without the leading 429 or rate_limit_error -> fails (None)."""
    p = orcr_pi.PiProvider()
    shown = p.usage_limit(PI_LIMIT_ERROR)
    assert (shown.state, shown.kind, shown.reason) == ("waiting", "usage_limit", "usage limit")
    assert p.usage_limit("Retry failed after 3 attempts: " + PI_LIMIT_ERROR) is not None
    assert p.usage_limit("Error: 402 insufficient_quota") is not None
    for other in ("500 Internal server error", "fetch failed", "401 invalid x-api-key",
                  "400 prompt is too long: 212000 tokens > 200000, request_id req_429"):  # fmt: skip
        assert p.usage_limit(other) is None, other
