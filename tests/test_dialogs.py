"""A dialog never eats a prompt (issue 14 item 2); a question mid-turn is reported blocked.

Claude Code and Codex can ask a question before their input is ready: a
folder-trust check, Claude's custom API key approval, its first-run setup.
``tests/fakes/claude`` and ``tests/fakes/codex`` draw those dialogs with the
real texts (``--fake-dialogs``) and take the real answering keys; a prompt typed
into one is lost and its Enter chooses the highlighted option ("No, exit" for
Claude's trust check). orcr must see the dialog on the screen, wait in
``starting`` with the reason shown (not failing on the stuck-start guard),
answer it itself only with ``trust_cwd``, and type the prompt exactly once once
the dialog is answered. On real tmux and on the herdr emulator.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from fake_clis import configure, run_agent, wait_idle
from orcr_claude.slug import project_slug

from orcr_core.kit.testing import until


def _cwd(tmp: Path) -> Path:
    cwd = tmp / "fresh_worktree"
    cwd.mkdir(exist_ok=True)
    return cwd


def _kinds(live, uuid: str) -> list[str]:
    return [e["kind"] for e in live.events(uuid)]


def _blocked(live, path: str, what: str, timeout: float = 30) -> dict:
    return until(
        lambda: (a := live.get(path))["blocked"] and what in a["blocked"] and a,
        timeout,
        f"{path} blocked on {what!r}",
    )


def _claude_prompts(tmp: Path, cwd: Path, uuid: str) -> list[str]:
    """The user prompts Claude's transcript holds: what was really submitted."""
    path = tmp / "claude" / "projects" / project_slug(str(cwd)) / f"{uuid}.jsonl"
    records = [json.loads(ln) for ln in path.read_text().splitlines()]
    return [
        r["message"]["content"]
        for r in records
        if r["type"] == "user" and isinstance(r["message"]["content"], str)
    ]


def test_claude_trust_dialog_blocks_until_a_person_answers(live, short_tmp):
    """Blocked with the reason everywhere, the stuck-start guard held off, answered
    with ``agent send --key``, then the prompt typed exactly once."""
    cwd = _cwd(short_tmp)
    # max_starting is short, yet long enough for the dialog to be seen on a loaded machine
    # (else the guard ends the agent before it is blocked)
    configure(live, short_tmp, claude=["--fake-dialogs", "trust"], timings='max_starting = "3s"\n')
    live.start_server()
    uuid = run_agent(live, "claude", "w/one", "fix the bug", cwd=cwd)
    a = _blocked(live, "w/one", "trust")
    reason = f"Claude Code asks whether to trust {cwd} — answer it with `orcr agent attach w/one`"
    assert a["status"] == "starting" and a["blocked"].startswith(reason), a
    assert "providers.claude.trust_cwd" in a["blocked"]
    assert a["blocked_since"]

    ls = live.run("agent", "ls", check=True).stdout
    assert "starting (blocked)" in ls and f"blocked w/one: {reason}" in ls, ls
    status = live.run("server", "status", check=True).stdout
    assert f"blocked w/one: {reason}" in status, status
    top = live.run("top", "--once", check=True).stdout
    assert "blocked" in top and f"trust {cwd}" in top, top
    top_json = json.loads(live.run("top", "--once", "--json", check=True).stdout)
    row = next(r for g in top_json["groups"] for r in g["agents"] if r["path"] == "w/one")
    assert row["blocked"] == a["blocked"]

    # Well past timings.max_starting (3s), the agent still waits for its person: the
    # dialog has its own limit (timings.dialog_wait, 1h by default).
    blocked_at = time.time()
    until(lambda: time.time() > blocked_at + 4.5, what="4.5s past max_starting")
    a = live.get("w/one")
    assert (a["status"], a["error"]) == ("starting", None), live.server_log()
    assert _kinds(live, uuid).count("agent.blocked") == 1  # a re-check writes nothing
    assert "prompt.requested" not in _kinds(live, uuid)  # nothing typed into the dialog

    r = live.run("agent", "send", "w/one", "--key", "down", "--key", "enter", check=True)
    assert r.stdout.strip() == "w/one keys down enter"
    wait_idle(live, "w/one")
    assert live.run("agent", "read", "w/one", check=True).stdout == "fix the bug\n"
    assert _claude_prompts(short_tmp, cwd, uuid) == ["fix the bug"]  # typed exactly once
    kinds = _kinds(live, uuid)
    assert kinds.count("prompt.requested") == 1 and kinds.count("agent.unblocked") == 1
    assert (
        kinds.index("agent.blocked")
        < kinds.index("agent.unblocked")
        < kinds.index("prompt.requested")
    )
    a = live.get("w/one")
    assert (a["blocked"], a["blocked_since"]) == (None, None)
    assert "blocked" not in live.run("agent", "ls", check=True).stdout
    trusted = json.loads((short_tmp / "claude" / ".claude.json").read_text())
    assert trusted["projects"][str(cwd)]["hasTrustDialogAccepted"] is True


def test_claude_trust_cwd_answers_the_trust_dialog_itself(live, short_tmp):
    """``trust_cwd = true``: orcr chooses "Yes, I trust this folder"; the API key
    question that follows has no such option, so it waits for a person."""
    cwd = _cwd(short_tmp)
    configure(
        live,
        short_tmp,
        claude=["--fake-dialogs", "trust,api-key"],
        claude_opts="trust_cwd = true\n",
    )
    live.start_server()
    uuid = run_agent(live, "claude", "w/two", "hello", cwd=cwd)
    a = _blocked(live, "w/two", "API key")
    assert "orcr agent send w/two --key up --key enter" in a["blocked"], a
    answered = [e["data"] for e in live.events(uuid) if e["kind"] == "agent.dialog_answered"]
    assert answered == [
        {
            "path": "w/two",
            "dialog": "trust",
            "keys": ["down", "enter"],
            "option": "providers.claude.trust_cwd",
        }
    ]
    trusted = json.loads((short_tmp / "claude" / ".claude.json").read_text())
    assert trusted["projects"][str(cwd)]["hasTrustDialogAccepted"] is True

    live.run("agent", "send", "w/two", "--key", "up", "--key", "enter", check=True)
    wait_idle(live, "w/two")
    assert _claude_prompts(short_tmp, cwd, uuid) == ["hello"]
    assert _kinds(live, uuid).count("prompt.requested") == 1


def test_trust_cwd_types_only_into_the_tui_restarted_by_the_answer(live, short_tmp):
    """A TUI may restart itself after orcr answered its question (Gemini CLI 0.61 does
    after its trust question: 10-30 s on a busy machine), showing nothing the adapter
    knows and losing the keys typed meanwhile. Past the 10 s wait for an unknown screen
    orcr must not type into it: the prompt goes in once, at the restarted TUI's input."""
    cwd = _cwd(short_tmp)
    configure(
        live,
        short_tmp,
        claude=["--fake-dialogs", "trust", "--fake-trust-restart", "13"],
        claude_opts="trust_cwd = true\n",
    )
    live.start_server()
    uuid = run_agent(live, "claude", "w/re", "after the restart", cwd=cwd)
    wait_idle(live, "w/re", timeout=60)
    assert _claude_prompts(short_tmp, cwd, uuid) == ["after the restart"]
    kinds = _kinds(live, uuid)
    assert kinds.count("agent.dialog_answered") == 1 and kinds.count("prompt.requested") == 1
    assert "not recognised" not in live.server_log()


def test_claude_first_run_setup_is_recognised(live, short_tmp):
    """Claude's first-run setup (theme, then security notes) blocks too; a person
    pressing Enter through it lets the prompt through once."""
    cwd = _cwd(short_tmp)
    configure(live, short_tmp, claude=["--fake-dialogs", "onboarding"])
    live.start_server()
    uuid = run_agent(live, "claude", "w/new", "first", cwd=cwd)
    _blocked(live, "w/new", "first-run setup")
    live.run("agent", "send", "w/new", "--key", "enter", check=True)  # the theme
    live.run("agent", "send", "w/new", "--key", "enter", check=True)  # the security notes
    wait_idle(live, "w/new")
    assert _claude_prompts(short_tmp, cwd, uuid) == ["first"]


def test_an_unanswered_dialog_ends_the_agent_after_dialog_wait(live, short_tmp):
    """``timings.dialog_wait`` bounds the wait; the error names the dialog."""
    cwd = _cwd(short_tmp)
    configure(
        live,
        short_tmp,
        claude=["--fake-dialogs", "trust"],
        timings='max_starting = "30s"\ndialog_wait = "2s"\n',
    )
    live.start_server()
    run_agent(live, "claude", "w/late", "never typed", cwd=cwd)
    _blocked(live, "w/late", "trust")
    r = live.run("agent", "wait", "w/late", "--timeout", "30s", timeout=60)
    assert r.returncode == 5, (r.stdout, r.stderr)
    a = live.get("w/late")
    assert (a["status"], a["exit_reason"]) == ("ended", "failed")
    assert a["error"].startswith("a dialog went unanswered for 2s (timings.dialog_wait): "), a
    assert f"trust {cwd}" in a["error"]


def test_codex_trust_prompt_in_a_git_repository(live, short_tmp):
    """Codex's trust question blocks; answered with Enter, the prompt goes once."""
    cwd = _cwd(short_tmp)
    configure(live, short_tmp, codex=["--fake-dialogs", "trust"])
    live.start_server()
    uuid = run_agent(live, "codex", "x/one", "codex hello", cwd=cwd)
    a = _blocked(live, "x/one", "trust")
    assert a["blocked"].startswith(f"Codex asks whether to trust {cwd}"), a
    assert "providers.codex.trust_cwd" in a["blocked"]
    live.run("agent", "send", "x/one", "--key", "enter", check=True)
    wait_idle(live, "x/one")
    assert live.run("agent", "read", "x/one", check=True).stdout == "codex hello\n"
    assert _kinds(live, uuid).count("prompt.requested") == 1
    assert f'[projects."{cwd}"]' in (short_tmp / "codex" / "config.toml").read_text()


def test_codex_trust_cwd_answers_it(live, short_tmp):
    cwd = _cwd(short_tmp)
    configure(live, short_tmp, codex=["--fake-dialogs", "trust"], codex_opts="trust_cwd = true\n")
    live.start_server()
    uuid = run_agent(live, "codex", "x/two", "auto trusted", cwd=cwd)
    wait_idle(live, "x/two")
    assert live.run("agent", "read", "x/two", check=True).stdout == "auto trusted\n"
    kinds = _kinds(live, uuid)
    assert "agent.blocked" not in kinds and kinds.count("agent.dialog_answered") == 1
    assert kinds.count("prompt.requested") == 1


def test_a_blocked_agent_survives_a_server_crash_and_is_typed_into_once(live, short_tmp):
    """SIGKILL while blocked: the restarted server recovers the row still blocked (the
    reason is in the store), re-reads the screen, and types the prompt once it is answered.
    A kill while blocked cancels the start."""
    cwd = _cwd(short_tmp)
    configure(live, short_tmp, claude=["--fake-dialogs", "trust"])
    live.start_server()
    uuid = run_agent(live, "claude", "w/crash", "after the crash", cwd=cwd)
    run_agent(live, "claude", "w/kill", "never", cwd=cwd)
    before = _blocked(live, "w/crash", "trust")
    _blocked(live, "w/kill", "trust")
    live.kill_server()
    live.start_server()
    after = live.get("w/crash")
    assert (after["status"], after["blocked"], after["blocked_since"]) == (
        "starting",
        before["blocked"],
        before["blocked_since"],
    ), live.server_log()

    live.run("agent", "kill", "w/kill", check=True)
    until(lambda: live.get("w/kill")["status"] == "ended", what="w/kill ended")
    assert live.get("w/kill")["exit_reason"] == "canceled"

    live.run("agent", "send", "w/crash", "--key", "down", "--key", "enter", check=True)
    wait_idle(live, "w/crash")
    assert _claude_prompts(short_tmp, cwd, uuid) == ["after the crash"]
    kinds = _kinds(live, uuid)
    assert kinds.count("agent.blocked") == 1 and kinds.count("prompt.requested") == 1


def test_send_key_refuses_what_it_cannot_press(live, short_tmp):
    """Keys need a live pane and known names; a PROMPT and --key do not mix."""
    configure(live, short_tmp, claude=["--fake-dialogs", "trust"])
    live.start_server()
    live.run("agent", "run", "--provider", "claude", "--path", "w/k", "--cwd", str(_cwd(short_tmp)),
             "p", check=True)  # fmt: skip
    _blocked(live, "w/k", "trust")
    r = live.run("agent", "send", "w/k", "--key", "hyperspace")
    assert r.returncode != 0 and "key 'hyperspace'" in r.stderr, r.stderr
    r = live.run("agent", "send", "w/k", "text", "--key", "enter")
    assert r.returncode == 2 and "--key presses keys only" in r.stderr
    r = live.run("agent", "send", "w/k")
    assert r.returncode == 2 and "missing PROMPT" in r.stderr
    assert live.get("w/k")["blocked"]  # nothing was pressed
    live.run("agent", "kill", "w/k", check=True)
    until(lambda: live.get("w/k")["status"] == "ended", what="w/k ended")
    r = live.run("agent", "send", "w/k", "--key", "enter")
    assert r.returncode != 0 and "has no live pane" in r.stderr, r.stderr


# -- a question in the middle of a turn (agents/asking.py) -----------------------------


def _asking(live, tmp: Path, timings: str = "") -> Path:
    cwd = _cwd(tmp)
    # the folder is trusted by config (no start-up dialog); blocked_after short for the test
    configure(live, tmp, timings='blocked_after = "1s"\n' + timings)
    live.start_server()
    return cwd


PERMISSION = (
    "Claude Code asks permission (Bash command `echo checking`): Do you want to proceed? — "
    "answer it with `orcr agent attach w/ask`, or `orcr agent send w/ask --key enter` for “1. Yes”"
)


def test_a_permission_prompt_mid_turn_is_reported_blocked_until_answered(live, short_tmp):
    """The turn stays ``working`` and the agent is **blocked** with what it asks, shown
    by get/ls/status/top, never flagged stalled however long it waits; a crash of the
    server keeps it; answering in the pane clears it and the turn ends with its answer."""
    cwd = _asking(live, short_tmp, timings='stall_after = "1s"\n')
    uuid = run_agent(live, "claude", "w/ask", "[ask] checked it", cwd=cwd)
    a = _blocked(live, "w/ask", "Do you want to proceed?")
    assert (a["status"], a["blocked"], a["stalled"]) == ("working", PERMISSION, False), a
    assert a["blocked_since"]
    ls = live.run("agent", "ls", check=True).stdout
    assert "working (blocked)" in ls and f"blocked w/ask: {PERMISSION}" in ls, ls
    assert f"blocked w/ask: {PERMISSION}" in live.run("server", "status", check=True).stdout
    top = json.loads(live.run("top", "--once", "--json", check=True).stdout)
    row = next(r for g in top["groups"] for r in g["agents"] if r["path"] == "w/ask")
    assert (row["status"], row["blocked"]) == ("working", PERMISSION)
    assert top["header"]["blocked"] == 1

    # quiet well past stall_after: a person is being asked, which is no stall
    since = time.time()
    until(lambda: time.time() > since + 2.5, what="2.5s past stall_after")
    live.kill_server()  # SIGKILL: the question is in the store, not in memory
    live.start_server()
    a = live.get("w/ask")
    assert (a["status"], a["blocked"], a["stalled"]) == ("working", PERMISSION, False), a
    kinds = _kinds(live, uuid)
    assert kinds.count("agent.blocked") == 1
    flags = [e["data"]["stalled"] for e in live.events(uuid) if e["kind"] == "agent.stalled"]
    assert flags in ([], [True, False]), flags  # if flagged before it was seen asking: cleared
    blocked = next(e["data"] for e in live.events(uuid) if e["kind"] == "agent.blocked")
    assert (blocked["dialog"], blocked["status"]) == ("permission", "working")

    live.run("agent", "send", "w/ask", "--key", "enter", check=True)  # "1. Yes"
    wait_idle(live, "w/ask")
    assert live.run("agent", "read", "w/ask", check=True).stdout == "checked it\n"
    a = live.get("w/ask")
    assert (a["blocked"], a["blocked_since"], a["turn_status"]) == (None, None, "completed")
    kinds = _kinds(live, uuid)
    assert kinds.count("agent.unblocked") == 1
    assert kinds.index("agent.blocked") < kinds.index("agent.unblocked")
    assert "blocked" not in live.run("agent", "ls", check=True).stdout


def test_a_permission_refused_ends_the_turn_interrupted_and_unblocked(live, short_tmp):
    """ "3. No": Claude Code rejects the tool and ends the turn; the reason goes with it."""
    cwd = _asking(live, short_tmp)
    uuid = run_agent(live, "claude", "w/ask", "[ask] never said", cwd=cwd)
    _blocked(live, "w/ask", "Do you want to proceed?")
    live.run("agent", "send", "w/ask", "--key", "down", "--key", "down", "--key", "enter",
             check=True)  # fmt: skip
    r = live.run("agent", "wait", "w/ask", "--timeout", "30s", timeout=60)
    assert r.returncode == 7 and "interrupted" in r.stdout + r.stderr, (r.stdout, r.stderr)
    a = live.get("w/ask")
    assert (a["status"], a["turn_status"], a["blocked"]) == ("idle", "interrupted", None)
    assert _kinds(live, uuid).count("agent.unblocked") == 1


def test_a_quiet_turn_with_no_question_on_screen_is_not_blocked(live, short_tmp):
    """Quiet is not asking: a turn that thinks for 3s (nothing written) past
    blocked_after has its screen read, shows no question, and stays plain ``working``."""
    cwd = _asking(live, short_tmp)
    uuid = run_agent(live, "claude", "w/slow", "[sleep 3] slow answer", cwd=cwd)
    until(lambda: live.get("w/slow")["status"] == "working", what="w/slow working")
    wait_idle(live, "w/slow")
    assert live.run("agent", "read", "w/slow", check=True).stdout == "slow answer\n"
    assert "agent.blocked" not in _kinds(live, uuid), live.server_log()


def test_a_turn_timeout_still_ends_an_agent_that_waits_for_an_answer(live, short_tmp):
    """``--timeout`` bounds the turn, question or not; the ended row asks nothing."""
    cwd = _asking(live, short_tmp)
    r = live.run("agent", "run", "--provider", "claude", "--path", "w/late", "--cwd", str(cwd),
                 "--timeout", "4s", "[ask] too late", check=True)  # fmt: skip
    uuid = r.stdout.split()[1]
    _blocked(live, "w/late", "Do you want to proceed?")
    until(lambda: live.get("w/late")["status"] == "ended", 30, "w/late ended")
    a = live.get("w/late")
    assert (a["exit_reason"], a["blocked"], a["blocked_since"]) == ("timeout", None, None), a
    unblocked = [e["data"] for e in live.events(uuid) if e["kind"] == "agent.unblocked"]
    assert unblocked == [{"path": "w/late", "why": "now ended", "status": "ended"}]


def test_wait_ready_reads_a_slow_screen_less_and_less_often(monkeypatch):
    """A TUI slow to draw (5 s on a busy machine) costs a few screen reads, each a
    multiplexer round trip: the pause grows from 0.05 s to 0.25 s. Virtual time.
    Planted: a fixed 0.05 s pause -> 100 reads -> fails."""
    from types import SimpleNamespace

    from orcr_core.agents import dialogs

    now = [0.0]
    clock = SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    monkeypatch.setattr(dialogs, "time", clock)
    reads = []

    def read(pane):
        reads.append(now[0])
        return "> " if now[0] >= 5.0 else ""

    dialogs.wait_ready(SimpleNamespace(read=read), pane=None)
    assert reads[-1] < 5.3, "drawn at 5 s, seen within one longest pause"
    assert len(reads) <= 30, len(reads)
    assert reads[1] - reads[0] == dialogs.READ_EVERY[0]


def test_wait_ready_reads_a_blank_screen_when_the_program_wrote(monkeypatch):
    """With the program's pid known (``ProgramProcess``), a blank screen is read again
    when the program wrote (``/proc/<pid>/io``); while it only reads (loading itself)
    every QUIET_MAX; while it does neither (a child of its own may draw) every
    QUIET_READ. A TUI drawing at 5 s costs a handful of multiplexer round trips and
    is seen within one pause, or within QUIET_READ when a child draws. Virtual time.
    Planted: FirstDraw ignoring the pid (reads at every pause) -> 24 reads -> fails;
    a read every QUIET_READ however busy the program -> 6 reads -> fails."""
    from types import SimpleNamespace

    from orcr_core.agents import dialogs

    now = [0.0]
    clock = SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    monkeypatch.setattr(dialogs, "time", clock)
    # (rchar, wchar) of the program at a time: a Python TUI loads itself, then draws;
    # a launcher whose child draws neither reads nor writes
    programs = {
        "draws itself": lambda t: (int(t * 1000), 0 if t < 5.0 else 120),
        "a child draws": lambda t: (4096, 12),
    }
    for name, io in programs.items():
        now[0], reads = 0.0, []
        monkeypatch.setattr(dialogs.procs, "io_counts", lambda pid, io=io: io(now[0]))

        def read(pane, reads=reads):
            reads.append(now[0])
            return "> " if now[0] >= 5.0 else ""

        driver = SimpleNamespace(read=read, program_pid=lambda pane: 4242)
        dialogs.wait_ready(driver, pane=None)
        child = name == "a child draws"
        limit = 5.0 + (dialogs.QUIET_READ if child else dialogs.READ_EVERY[1])
        assert reads[-1] <= limit + 0.01, (name, reads)
        assert len(reads) <= (7 if child else 4), (name, len(reads), reads)


def test_io_counts_count_what_a_process_wrote():
    """``procs.io_counts`` is the process's ``rchar``/``wchar``: its ``wchar`` grows by
    what it wrote to a pipe (a terminal's the same), and it is None once it is gone."""
    import subprocess
    import sys

    from orcr_core.agents import procs

    p = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline(); print('x' * 99, flush=True); "
         "sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        before = procs.io_counts(p.pid)
        assert before is not None
        p.stdin.write(b"\n")
        p.stdin.flush()
        assert p.stdout.readline() == b"x" * 99 + b"\n"
        after = procs.io_counts(p.pid)
        assert after[1] - before[1] >= 100 and after[0] > before[0]
    finally:
        p.stdin.close()
        p.wait(10)
    assert procs.io_counts(p.pid) is None


def test_an_answer_counts_only_for_the_start_it_was_given_in(short_tmp):
    """``dialogs.answered_since_start``: an answer before the pane's last start (a
    resumed agent, a new TUI) does not count, one after it does, and with no start
    recorded any answer counts. Planted: the start's seq ignored (any answer ever) ->
    the first assertion fails."""
    from types import SimpleNamespace

    from orcr_core.agents import dialogs
    from orcr_core.store import db as store_db
    from orcr_core.store import events
    from orcr_core.store.models import db

    store_db.open_store(short_tmp / "store.db")
    try:
        agent = SimpleNamespace(uuid="u1")

        def emit(kind: str) -> None:
            with db.atomic("IMMEDIATE"):
                events.emit(kind, "u1", path="a")

        emit("agent.dialog_answered")  # the first start's answer
        emit("pane.start_requested")  # resumed: a new start
        assert dialogs.answered_since_start(agent) is False
        emit("agent.dialog_answered")
        assert dialogs.answered_since_start(agent) is True
        assert dialogs.answered_since_start(SimpleNamespace(uuid="other")) is False
        with db.atomic("IMMEDIATE"):
            events.emit("agent.dialog_answered", "u2", path="b")  # no start recorded
        assert dialogs.answered_since_start(SimpleNamespace(uuid="u2")) is True
    finally:
        store_db.close_store()


def test_wait_ready_reads_a_new_tui_once_it_wrote_and_once_more_for_the_lag(monkeypatch):
    """A new TUI that wrote nothing yet is not read at once (its screen is blank);
    once it wrote, its screen is read at the next pause, and once more ``LAG`` after
    that write when the read found nothing drawn (the multiplexer behind), not at
    every pause; a launcher whose child may have drawn is read at once. Virtual time.
    Planted: the first read at once again -> 2 and 3 reads -> fails; every pause read
    for 0.3 s after a write (as before) -> 3 reads -> fails; no read again after the
    lag -> the lagging draw seen at 4.2 s -> fails; the children not asked -> the
    launcher read at 3 s -> fails."""
    from types import SimpleNamespace

    from orcr_core.agents import dialogs

    now = [0.0]
    clock = SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    monkeypatch.setattr(dialogs, "time", clock)
    cases = {  # name: (its writes (at, wchar after), drawn on screen at, reads)
        "draws at its first write": (((1.0, 120),), 1.0, 1),
        "writes a file, then draws": (((0.1, 50), (0.3, 170)), 0.3, 2),
        "the multiplexer draws late": (((1.0, 120),), 1.3, 2),
    }
    for name, (writes, drawn, count) in cases.items():
        now[0], reads = 0.0, []

        def io(pid, writes=writes):
            wchar = max([w for at, w in writes if now[0] >= at], default=0)
            return (int(now[0] * 1000), wchar)  # it loads itself meanwhile

        monkeypatch.setattr(dialogs.procs, "io_counts", io)
        monkeypatch.setattr(dialogs.procs, "has_children", lambda pid: False)

        def read(pane, reads=reads, drawn=drawn):
            reads.append(now[0])
            return "> " if now[0] >= drawn else ""

        driver = SimpleNamespace(read=read, program_pid=lambda pane: 4242)
        dialogs.wait_ready(driver, pane=None)
        assert reads[0] >= writes[0][0], (name, reads)
        assert len(reads) == count, (name, reads)
        assert reads[-1] <= drawn + dialogs.LAG + dialogs.READ_EVERY[1], (name, reads)
    # a launcher that wrote nothing but has a child (which drew long ago): read at once
    now[0], reads = 0.0, []
    monkeypatch.setattr(dialogs.procs, "io_counts", lambda pid: (int(now[0] * 1000), 0))
    monkeypatch.setattr(dialogs.procs, "has_children", lambda pid: True)
    driver = SimpleNamespace(
        read=lambda pane: reads.append(now[0]) or "> ", program_pid=lambda pane: 4242
    )
    dialogs.wait_ready(driver, pane=None)
    assert reads == [0.0]
