"""The sandbox composes (issue 36 item 9) with worktrees, the memory ceiling (cgroup v1
on the real kernel), resume, parking and herdr's native restore, on tmux and the herdr
emulator.

Found here: git failed in a sandboxed worktree (``fatal: not a git repository``): the
checkout's ``.git`` file points into the repository's ``.git``, hidden with the home
or /tmp. Now its common dir is bound read-only, and objects/refs/logs and its own
``worktrees/<name>`` writable (policy._git_dirs); hooks stay read-only.

Planted: _git_dirs returning nothing -> the command test fails (git: not a git repository).
Planted: the whole common dir bound writable -> the command test fails (hook: ESCAPED).
Planted: the resume start without the sandbox (pipeline: sandbox=None if resuming) ->
the resume test fails (its second start is not through enter.py).
Planted: the resume start without the ceilings step (pipeline: wrapped = argv if
resuming) -> the resume test fails (the resumed agent is not in its memory group).
Traced (the resume test's herdr leg, off for a while): it checked the checkout after
the kill, which orcr's end-of-agent removal sometimes won (seen at load ~40, -n4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from orcr_core.ceilings import v1
from orcr_core.kit.testing import until
from orcr_core.sandbox import bwrap, enter

MiB = 2**20

pytestmark = pytest.mark.skipif(
    bwrap.unavailable() is not None or v1.unusable() is not None,
    reason=f"needs bubblewrap and cgroup v1: {bwrap.unavailable() or v1.unusable()}",
)

#: writes in its checkout, tries a folder outside, then stays (in the pane) for a look
PROBE = """
import json, os, sys, time
out = {}
open("made-inside.txt", "w").write("inside\\n")
try:
    open(sys.argv[1], "w").write("x")
    out["outside"] = "ESCAPED"
except OSError as exc:
    out["outside"] = type(exc).__name__
out["cwd"] = os.getcwd()
import subprocess
git = subprocess.run("git add made-inside.txt && git -c user.email=t@e -c user.name=t commit -qm in",
                     shell=True, capture_output=True, text=True)
out["git"] = git.stderr[-300:] if git.returncode else 0
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True,
                        text=True).stdout.strip()
try:  # a hook would run unconfined at the user's next commit in the repository
    open(os.path.join(common, "hooks", "post-commit"), "w").write("x")
    out["hook"] = "ESCAPED"
except OSError as exc:
    out["hook"] = type(exc).__name__
json.dump(out, open("result.json", "w"))
time.sleep(300)
"""


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "README").write_text("r\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "-m", "1"]):  # fmt: skip
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo


def _config(live, short_tmp) -> None:
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[worktrees]\ndir = "{short_tmp / "checkouts"}"\n'
    )


def _in_group(uuid: str, needle: str) -> list[str]:
    """The command lines of the processes in the agent's memory group holding ``needle``."""
    base = v1.ROOT / "memory" / v1.own("memory").lstrip("/")
    found = []
    for procs in base.glob(f"orcr-*/{uuid}/cgroup.procs"):
        for pid in procs.read_text().split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if needle in cmd:
                found.append(cmd)
    return found


def _starts(live, uuid: str) -> list[list[str]]:
    return [e["data"]["argv"] for e in live.events(uuid) if e["kind"] == "pane.start_requested"]


def _wrapped(argv: list[str]) -> bool:
    """Started through the sandbox's launcher (the event's argv is the one the
    ceilings' launch step then runs: the group is checked from the kernel)."""
    return argv[3] == enter.__file__ and "--unshare-net" in argv


def _groups_made(live, uuid: str) -> int:
    return sum(e["kind"] == "agent.ceilings" for e in live.events(uuid))


def test_a_sandboxed_command_agent_in_a_worktree_and_its_memory_group(live, short_tmp):
    """``--sandbox --worktree --memory-max 256MiB``: the probe writes in its checkout
    (the file is in the worktree, not the repo), a write outside is refused, the probe
    (seen from outside) is in the agent's memory group, and ``agent get`` shows the
    sandbox, the ceiling, the usage and the worktree."""
    _config(live, short_tmp)
    live.start_server()
    repo = _repo(short_tmp)
    (repo / "probe.py").write_text(PROBE)
    subprocess.run(["git", "-C", str(repo), "add", "probe.py"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t",
                    "commit", "-q", "-m", "probe"], check=True)  # fmt: skip
    outside = Path(tempfile.mkdtemp(prefix="orcr-sbc-", dir="/var/tmp"))
    try:
        with live.sdk() as o:
            uuid = o.run(None, provider="command", path="sc/cmd", cwd=str(repo), worktree=True,
                         sandbox=True, limits={"memory_max": "256MiB"},
                         argv=[sys.executable, "probe.py", str(outside / "x")])["uuid"]  # fmt: skip
            a = until(lambda: (g := o.get(uuid))["worktree"] and g["worktree"]["path"] and g, 30)
            wt = Path(a["worktree"]["path"])

            def written():
                try:
                    return json.loads((wt / "result.json").read_text())
                except (FileNotFoundError, ValueError):
                    return None

            result = until(written, 30, "the probe's result")
            assert result == {"outside": "OSError", "cwd": str(wt), "git": 0, "hook": "OSError"}, (
                result
            )
            assert (wt / "made-inside.txt").read_text() == "inside\n"
            assert not (repo / "made-inside.txt").exists() and not (outside / "x").exists()
            assert _in_group(uuid, "probe.py"), "the sandboxed probe is not in its memory group"
            a = o.get(uuid)
            assert a["sandbox"]["engine"] == "bwrap" and a["sandbox"]["allow_write"] == [str(wt)]
            assert a["memory"]["max"] == 256 * MiB and a["memory"]["current"] > 0, a["memory"]
            assert a["worktree"]["repo"] == str(repo) and a["cwd"] == str(wt)
            assert _wrapped(_starts(live, uuid)[0]) and _groups_made(live, uuid) == 1
            o.kill(uuid)
    finally:
        subprocess.run(["rm", "-rf", str(outside)], check=False)


def _kill_multiplexer(live) -> None:
    """Every pane gone, as tmux's ``kill-server``: herdr stopped without its session
    file (a cold restart would bring the panes back and orcr would wait for a native
    restore, :data:`native.RESTORE_GRACE`, before it judges the agent lost)."""
    if live.mux.kind == "herdr":
        emu = live.mux.emulator
        emu.stop(save=False)
        emu.session_file.unlink(missing_ok=True)
        emu.start()
    else:
        subprocess.run(["tmux", "-S", str(live.mux.socket), "kill-server"], check=True)


def test_a_resumed_echo_agent_is_again_sandboxed_and_in_its_group(live, short_tmp):
    """A command agent cannot be resumed (``resume_unsupported``), so the echo agent (a
    real TUI) carries this leg: sandboxed in a worktree under ``--memory-max``, its
    multiplexer dies (``lost``), ``agent resume`` starts it again through both launch
    steps, it is in its group again and answers a turn in its worktree."""
    _config(live, short_tmp)
    live.start_server()
    repo = _repo(short_tmp)
    with live.sdk() as o:
        uuid = o.run("first", provider="echo", path="sc/echo", cwd=str(repo), worktree=True,
                     sandbox=True, limits={"memory_max": "256MiB"})["uuid"]  # fmt: skip
        assert o.wait(uuid, timeout=30)["turn_status"] == "completed"
        _kill_multiplexer(live)
        until(lambda: o.get(uuid)["status"] == "ended", 30, "lost")
        # its checkout is kept or removed right after the end: until then resume answers
        # worktree_busy, "try again in a moment" (CI: a rerun when it was asked at once)
        until(lambda: o.get(uuid)["worktree"]["state"] not in ("requested", "created"), 30,
              "the ended agent's checkout kept")  # fmt: skip
        live.run("agent", "resume", uuid, check=True)
        until(lambda: o.get(uuid)["status"] == "idle", 30, "resumed, idle")
        starts = _starts(live, uuid)
        assert len(starts) == 2 and all(_wrapped(s) for s in starts), starts
        # idle is the row; the resumed TUI's process is waited on in its group itself
        until(lambda: _in_group(uuid, "echo"), 30, "the resumed agent in its memory group")
        assert _groups_made(live, uuid) == 2
        o.send(uuid, "second")
        assert o.wait(uuid, timeout=30)["turn_status"] == "completed"
        assert o.read(uuid)["text"].strip() == "second"
        a = o.get(uuid)
        assert a["sandbox"]["engine"] == "bwrap" and a["memory"]["current"] > 0, a
        assert a["cwd"] == a["worktree"]["path"] != str(repo)
        assert os.path.isdir(a["worktree"]["path"])  # before the kill: at its end orcr
        o.kill(uuid)  # removes a checkout that holds nothing (a race for this check)


def _planted_key(short_tmp) -> tuple[Path, Path]:
    """A home outside /tmp (which the sandbox empties anyway) with a planted key: the
    server's home, so the sandbox hides it; read by its absolute path, which the
    read-only system would show an agent outside the sandbox."""
    home = Path(tempfile.mkdtemp(prefix="orcr-sbc-home-", dir="/var/tmp"))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    return home, home / ".ssh" / "id_ed25519"


def _reads_key(o, uuid: str, key: Path) -> str:
    """A turn that tries the key: its answer (the cat's output first)."""
    o.send(uuid, f"[sh] cat {key} 2>&1; echo looked")
    assert o.wait(uuid, timeout=30)["turn_status"] == "completed"
    return o.read(uuid)["text"]


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_natively_restored_agent_is_again_sandboxed_and_in_its_group(live, short_tmp):
    """herdr restores a sandboxed echo agent itself after a cold restart (its reported
    ``resume_argv``): orcr re-matches it, it runs through the sandbox's launcher again
    (its restored process is bubblewrap, in its memory group), cannot read the planted
    key, and answers. Found here: herdr refused the report (``invalid_resume_argv``: at
    most 64 elements; bubblewrap's argv has ~100), so the agent was lost and resumed by
    orcr, never restored; the launcher now reads its arguments from a file in the
    agent's socket folder (policy.restore_argv).
    Planted: restore_argv returning argv unchanged -> fails (agent.resume_refused).
    Planted: the report without the sandbox (sandbox=None) -> fails (its reported
    command does not go through the launcher)."""
    home, key = _planted_key(short_tmp)
    live.env["HOME"] = str(home)
    try:
        _config(live, short_tmp)
        live.start_server()
        with live.sdk() as o:
            uuid = o.run("first", provider="echo", path="sc/nat", cwd=str(short_tmp),
                         sandbox=True, limits={"memory_max": "256MiB"})["uuid"]  # fmt: skip
            assert o.wait(uuid, timeout=30)["turn_status"] == "completed"
            reported = lambda: [  # noqa: E731
                e["kind"] for e in live.events(uuid) if e["kind"].startswith("agent.resume_re")
            ]
            assert until(reported, 15, "the resume command reported") == ["agent.resume_reported"]
            emu = live.mux.emulator
            pane = o.get(uuid)["pane_id"]
            argv = emu.pane(pane).resume_argv["argv"]
            assert enter.__file__ in argv and "--args-file" in argv, argv
            before = _in_group(uuid, "bwrap")
            emu.resume_agents = True
            emu.restart()
            until(
                lambda: any(
                    e["kind"] == "agent.rematched" and e["data"].get("native_restore")
                    for e in live.events(uuid)
                ),
                30,
                "the restored pane re-matched",
            )
            until(lambda: o.get(uuid)["status"] == "idle", 30, "idle again")
            assert len(_starts(live, uuid)) == 1  # orcr started nothing itself
            until(lambda: _in_group(uuid, "bwrap"), 15, "the restored bubblewrap in its group")
            assert before  # the first life's was too (the restore is a new process)
            answer = _reads_key(o, uuid, key)
            assert "PRIVATE KEY" not in answer and "No such file" in answer, answer
            o.kill(uuid)
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def test_a_parked_and_unparked_agent_is_still_sandboxed_and_in_its_group(live, short_tmp):
    """A sandboxed echo agent under ``--memory-max`` idles and is parked; a prompt
    un-parks it: the same bubblewrap process is in its memory group before and after
    (parking moves the pane, it starts nothing), the agent still cannot read the
    planted key, and its turn still ends.
    Planted: the pipeline's start without the sandbox (sandbox=None) -> fails (reads
    the key, no bwrap in its group)."""
    home, key = _planted_key(short_tmp)
    live.env["HOME"] = str(home)
    try:
        live.config(
            live.mux.config()
            + '[timings]\npoll_every = "50ms"\npark_after = "1s"\n'
            + f'[worktrees]\ndir = "{short_tmp / "checkouts"}"\n'
        )
        live.start_server()
        with live.sdk() as o:
            uuid = o.run("first", provider="echo", path="sc/park", cwd=str(short_tmp),
                         sandbox=True, limits={"memory_max": "256MiB"})["uuid"]  # fmt: skip
            assert o.wait(uuid, timeout=30)["turn_status"] == "completed"
            until(lambda: o.get(uuid)["parked"], 30, "parked")
            boxed = until(lambda: _in_group(uuid, "bwrap"), 15, "its bubblewrap in its group")
            answer = _reads_key(o, uuid, key)  # the prompt un-parks it
            assert "PRIVATE KEY" not in answer and "No such file" in answer, answer
            kinds = [(e["kind"], e["data"].get("parked")) for e in live.events(uuid)]
            assert ("pane.moved", True) in kinds and ("pane.moved", False) in kinds, kinds
            assert _in_group(uuid, "bwrap") == boxed and len(_starts(live, uuid)) == 1
            o.kill(uuid)
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
