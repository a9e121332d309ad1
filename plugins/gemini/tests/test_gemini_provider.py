"""The Gemini CLI adapter's contract: argv, env, the session file, the pin."""

import datetime
import json
import os
import pwd
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest
from orcr_gemini import GeminiProvider, settings

from orcr_core.contracts import LaunchSpec, ProviderError, SessionPointer

UUID = "4a7cfc47-4211-42bc-89b6-a577b17de7d8"


def spec(tmp_path, **options):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True, mode=0o700)
    return LaunchSpec(UUID, "demo/g", str(tmp_path), str(data), options)


def test_argv_gives_the_session_id_and_resume_takes_it(tmp_path):
    p = GeminiProvider()
    s = spec(tmp_path, model="gemini-2.5-pro", extra_args=["--debug"])
    assert p.launch_argv(s) == ["gemini", "--session-id", UUID, "--model", "gemini-2.5-pro",
                                "--debug"]  # fmt: skip
    assert p.launch_session(s) == SessionPointer("orcr", "id", UUID)
    assert p.resume_argv(s, SessionPointer("orcr", "id", UUID))[:3] == ["gemini", "--resume", UUID]
    with pytest.raises(ProviderError, match="needs a UUID"):
        p.launch_argv(LaunchSpec("nope", "a", "/", "/"))


def test_the_version_pin_names_its_range():
    p = GeminiProvider()
    assert p.check_version("0.61.0", {}) is None
    with pytest.raises(ProviderError, match=r">=0\.61,<0\.62") as err:
        p.check_version("0.60.0", {})
    assert err.value.code == "unsupported_provider_version"
    assert "0.62.1" in p.check_version("0.62.1", {"allow_unpinned": True})


@pytest.fixture
def secure():
    """A private folder under the user's home (Gemini CLI skips a settings file below
    /tmp: writable by others)."""
    base = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache"
    base.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="orcr-gemini-test-", dir=base))
    for parent in folder.parents:
        if os.stat(parent).st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            pytest.skip(f"{parent} is writable by others: Gemini CLI would skip the file")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_env_points_at_a_settings_file_with_the_hook(tmp_path, monkeypatch, secure):
    system = tmp_path / "system.json"
    system.write_text(json.dumps({"general": {"maxAttempts": 3}}))
    monkeypatch.setenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH", str(system))
    s = spec(tmp_path, home="/h", settings_dir=str(secure))
    env = GeminiProvider().launch_env(s)
    assert env["GEMINI_CLI_HOME"] == "/h"
    # removed from its environment: either one "true" makes Gemini CLI headless
    assert env["CI"] is None and env["GITHUB_ACTIONS"] is None
    # Gemini CLI restarts itself through its parent process after the trust question:
    # with GEMINI_CLI_NO_RELAUNCH it would exit instead
    assert "GEMINI_CLI_NO_RELAUNCH" not in env
    written = json.loads((secure / settings.FILE).read_text())
    (hook,) = written["hooks"]["AfterAgent"][0]["hooks"]
    assert hook["command"].endswith("orcr_gemini/hook.py") and hook["type"] == "command"
    assert written["general"] == {"maxAttempts": 3}  # the system settings in use, kept
    assert settings.hooked(s)


def test_no_hook_where_gemini_cli_would_not_load_it(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    s = spec(tmp_path, settings_dir=str(open_dir))
    env = GeminiProvider().launch_env(s)
    assert "GEMINI_CLI_SYSTEM_SETTINGS_PATH" not in env
    assert not (open_dir / settings.FILE).exists() and not settings.hooked(s)
    assert "GEMINI_CLI_SYSTEM_SETTINGS_PATH" not in GeminiProvider().launch_env(
        spec(tmp_path, stop_hook=False)
    )


def test_the_session_file_is_found_by_its_first_line(tmp_path):
    """Planted: the transcript located as the file last written to -> fails."""
    chats = tmp_path / ".gemini" / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    other = chats / f"session-2026-12-01T23-58-{UUID[:8]}.jsonl"
    other.write_text(json.dumps({"sessionId": UUID[:8] + "-other", "projectHash": "x"}) + "\n")
    p = GeminiProvider()
    s = spec(tmp_path, home=str(tmp_path), argv=["/nonexistent/gemini"])
    assert p.locate_transcript(SessionPointer("orcr", "id", UUID), s) is None
    mine = chats / f"session-2026-12-01T23-59-{UUID[:8]}.jsonl"
    mine.write_text(json.dumps({"sessionId": UUID, "projectHash": "x"}) + "\n")
    assert p.locate_transcript(SessionPointer("orcr", "id", UUID), s) == str(mine)
    # a resumed Gemini CLI opens a file of its own beside it, with its context alone,
    # written after the conversation's last line (real_cli, 0.61.0): a server located
    # the transcript then (restarted while the agent resumed) must still read the first
    resumed = chats / f"session-2026-12-02T00-15-{UUID[:8]}.jsonl"
    resumed.write_text(json.dumps({"sessionId": UUID, "startTime": "2026-12-02T00:15:00Z"}) + "\n")
    os.utime(mine, (time.time() - 60, time.time() - 60))
    assert p.locate_transcript(SessionPointer("orcr", "id", UUID), s) == str(mine)
    assert GeminiProvider.find_file(tmp_path, UUID) == str(resumed)  # the last written


def test_the_installed_version_comes_from_the_package(tmp_path):
    pkg = tmp_path / "node_modules" / "@google" / "gemini-cli"
    (pkg / "bundle").mkdir(parents=True)
    (pkg / "package.json").write_text(
        json.dumps({"name": "@google/gemini-cli", "version": "0.61.0"})
    )
    js = pkg / "bundle" / "gemini.js"
    js.write_text("#!/bin/sh\n")
    js.chmod(0o755)
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").symlink_to(js)
    assert settings.installed_version(str(bin_dir / "gemini")) == "0.61.0"
    assert settings.installed_version("/nonexistent/gemini") is None


def test_the_composer_is_ready_only_where_gemini_cli_asks_no_trust_question(tmp_path):
    """It draws its composer before the question: a prompt typed then answers it."""
    from pathlib import Path as P

    ready = (P(__file__).parent / "fixtures" / "screens" / "0.61.0-ready.txt").read_text()
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    cwd = tmp_path / "shop"
    cwd.mkdir()
    s = LaunchSpec(UUID, "demo/g", str(cwd), str(tmp_path), {"home": str(home)})
    p = GeminiProvider()
    assert p.screen_state(ready, s).state == "unknown"
    (home / ".gemini" / "trustedFolders.json").write_text(
        json.dumps({str(tmp_path): "TRUST_FOLDER"})
    )
    assert p.screen_state(ready, s).state == "ready"
    assert settings.trust_known(home, str(cwd))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(home): "TRUST_FOLDER"}))
    assert not settings.trust_known(home, str(cwd))
    (home / ".gemini" / "settings.json").write_text(
        '{"security": {"folderTrust": {"enabled": false}}}'
    )
    assert settings.trust_known(home, str(cwd))


SCREENS = Path(__file__).parent / "fixtures" / "screens"


def _asked_folder(tmp_path) -> tuple[Path, Path, LaunchSpec]:
    """A Gemini home that trusts nothing, the folder ``shop`` it asks about, a spec there."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    cwd = tmp_path / "shop"
    cwd.mkdir()
    return home, cwd, LaunchSpec(UUID, "demo/g", str(cwd), str(tmp_path), {"home": str(home)})


def test_a_composer_is_ready_only_after_the_restart_its_trust_answer_caused(tmp_path):
    """After "Trust folder" the asking process redraws its composer for a moment (also
    after its restart line), then restarts: only the composer of the process that
    opened its session file after the restart line showed takes the prompt (tmux, 0.61.0)."""
    ready = (SCREENS / "0.61.0-ready.txt").read_text()
    old = (SCREENS / "0.61.0-trust-answered-old-composer.txt").read_text()
    home, cwd, s = _asked_folder(tmp_path)
    other = LaunchSpec(UUID[:-1] + "0", "demo/h", str(cwd), str(tmp_path), {"home": str(home)})
    p = GeminiProvider()
    question = "\n".join([
        "│ Do you trust the files in this folder?       │",
        "│ ● 1. Trust folder (shop)                     │",
        "│   2. Don't trust                             │",
    ])  # fmt: skip
    chats = home / ".gemini" / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    first = chats / f"session-2026-12-02T00-37-{UUID[:8]}.jsonl"

    def opened(at: float) -> None:
        stamp = datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat()
        first.write_text(json.dumps({"sessionId": UUID, "startTime": stamp}) + "\n")

    assert p.screen_state(question, s).kind == "trust"
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(cwd): "TRUST_FOLDER"}))
    opened(time.time())  # the asking process opens its file once answered
    assert p.screen_state(old, s).state == "unknown"
    assert p.screen_state(old, other).state == "ready"  # an agent that was never asked
    restarting = question + "\n Gemini CLI is restarting to apply the trust changes...\n"
    assert p.screen_state(restarting, s).state == "unknown"
    assert p.screen_state(old, s).state == "unknown"  # it flips back for a moment
    assert p.screen_state(restarting + ready, s).state == "unknown"  # no new file yet
    first.unlink()
    assert p.screen_state(restarting + ready, s).state == "unknown"
    opened(time.time() + 1)  # the restarted process, same minute
    assert p.screen_state(restarting + ready, s).state == "ready"
    assert p.screen_state(ready, s).state == "ready"


def test_a_restart_whose_line_was_never_seen_does_not_hang_the_start(tmp_path, monkeypatch):
    """The restart line is polled for, and a poll can miss it (real_cli's trust test on
    herdr stayed ``starting`` past 90 s): a composer steady for ``STEADY`` seconds after
    the question is the restarted process's; one that flips back to a screen with no
    composer starts the count again."""
    from orcr_gemini import provider

    clock = [1000.0]
    monkeypatch.setattr(provider.time, "time", lambda: clock[0])
    ready = (SCREENS / "0.61.0-ready.txt").read_text()
    home, cwd, s = _asked_folder(tmp_path)
    p = GeminiProvider()
    question = "│ Do you trust the files in this folder?  │\n│ ● 1. Trust folder (shop)  │"
    assert p.screen_state(question, s).kind == "trust"
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(cwd): "TRUST_FOLDER"}))
    assert p.screen_state(ready, s).state == "unknown"  # no restart seen, no file
    clock[0] += provider.STEADY - 1
    assert p.screen_state(ready, s).state == "unknown"
    assert p.screen_state(" Gemini CLI is restarting", s).state != "ready"  # a break
    clock[0] += 2
    assert p.screen_state(ready, s).state == "unknown"  # counted from the break
    clock[0] += provider.STEADY
    assert p.screen_state(ready, s).state == "ready"
    assert p.screen_state(ready, s).state == "ready"


def test_the_reader_follows_its_session_into_the_file_of_a_restart(tmp_path):
    """After the trust question Gemini CLI restarts: the first file (no prompt) is
    deleted and the session goes on in a file named by the new minute."""
    chats = tmp_path / "chats"
    chats.mkdir()
    first = chats / f"session-2026-12-02T00-37-{UUID[:8]}.jsonl"
    meta = json.dumps({"sessionId": UUID, "projectHash": "x"}) + "\n"
    first.write_text(meta)
    reader = GeminiProvider().open_reader(str(first), settle=0.0)
    assert reader.poll().state == "idle"
    first.unlink()
    second = chats / f"session-2026-12-02T00-38-{UUID[:8]}.jsonl"
    lines = [{"id": "u1", "type": "user", "content": [{"text": "hello"}]},
             {"id": "g1", "type": "gemini", "content": "Hi after trust"}, {"orcr": "turn_end"}]  # fmt: skip
    second.write_text(meta + "".join(json.dumps(x) + "\n" for x in lines))
    got = reader.poll()
    assert [(t.status, t.final_text) for t in got.turns] == [("completed", "Hi after trust")]


def test_a_resumed_composer_is_ready_only_once_its_history_is_loaded(tmp_path):
    """``gemini --resume`` draws its composer before it has loaded the session, and a
    prompt typed then is lost (real_cli, 0.61.0 on tmux: pasted 70 ms before the
    history's ``$set``, the composer came back empty; 3 of 6 runs). The records are
    the ones the resumed process appended to its session file there. A server restarted
    while the agent resumes still waits (the mark is in the agent's data dir).
    Planted: the mark kept in memory only -> fails (the new provider calls it ready)."""
    ready = (SCREENS / "0.61.0-ready.txt").read_text()
    home, cwd, s = _asked_folder(tmp_path)
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(cwd): "TRUST_FOLDER"}))
    chats = home / ".gemini" / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    file = chats / f"session-2026-12-06T01-15-{UUID[:8]}.jsonl"

    def opened(at: float) -> dict:
        stamp = datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat()
        return {"sessionId": UUID, "startTime": stamp.replace("+00:00", "Z"), "kind": "main"}

    def append(*records: dict) -> None:
        with open(file, "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)

    context = {"id": "c1", "type": "user", "content": [{"text": "<session_context>\n…"}]}
    prompt = {"id": "u1", "type": "user", "content": [{"text": "remember the word octopus"}]}
    answer = {"id": "g1", "type": "gemini", "content": "ok"}
    append(opened(time.time() - 60), {"$set": {"messages": [context]}}, prompt, answer,
           {"orcr": "turn_end"})  # fmt: skip
    p = GeminiProvider()
    assert p.screen_state(ready, s).state == "ready"  # no resume: as before
    p.resume_argv(s, SessionPointer("orcr", "id", UUID))
    mark = Path(s.data_dir) / "gemini-resuming.json"
    assert mark.exists()  # on disk before the resumed process starts
    assert p.screen_state(ready, s).state == "unknown"  # the first process's records only
    append(opened(time.time() + 0.1), {"$set": {"messages": [context]}})
    assert p.screen_state(ready, s).state == "unknown"  # opened, history not loaded yet
    # the server restarts here: a new provider (no memory) still waits for the history
    p = GeminiProvider()
    assert p.screen_state(ready, s).state == "unknown"
    append({"$set": {"sessionId": UUID}})
    assert GeminiProvider().screen_state(ready, s).state == "unknown"
    append({"$set": {"messages": [context, prompt, answer]}})
    assert p.screen_state(ready, s).state == "ready"
    assert not mark.exists()  # its start is over: the mark goes
    assert p.screen_state(ready, s).state == "ready"  # and stays so
    assert GeminiProvider().screen_state(ready, s).state == "ready"

    # a session resumed before its first prompt has no history to wait for
    file.write_text(json.dumps(opened(time.time() - 60)) + "\n")
    p.resume_argv(s, SessionPointer("orcr", "id", UUID))
    assert p.screen_state(ready, s).state == "unknown"
    append(opened(time.time() + 0.1))
    assert p.screen_state(ready, s).state == "ready"
