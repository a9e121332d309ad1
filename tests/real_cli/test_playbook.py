"""The task-queue playbook at fleet scale with the real CLIs (issue 40 item 4).

One playbook run (``orcr tasks``, docs/tasks.md) on a small Python package, on tmux:
``ORCR_PLAYBOOK_TASKS`` tasks (8 unless set; at least 7), each a module and its unit
test, built alternately by Claude Code and Codex, each builder in its own checkout
(``--worktree``) committing its change, each verifier of the other family running the
unit test in a fresh checkout of the revision (real shell tool calls; the verdict is
the test's exit status). One builder worker (5 slots) and one verifier worker (2 slots)
run at once, under caps 4 / claude 3 / codex 2. ``t01`` is built wrong first and
rejected for real, then rebuilt; ``t02`` parks a question, answered while the workers
run; the last task depends on ``t01`` and imports its module (the scripted model is
``real_cli/playbook.py``). The builders' first model requests are held until the test
has seen the global cap filled with them and one more builder's agent queued, so the
cap is reached, under pressure, whatever the load; nothing else waits on time.

Checked: every task done, with exactly the attempts planned (one reject, nothing
reaped, no verification returned) and exactly the agents planned per task (no claim
lost, none doubled); the dependant's revision holds ``t01``'s; each prompt reached its
model once; no Enter requested after its agent's turn began (real_cli/enters.py, as
the enter-at-load test counts them); the caps reached and never exceeded, from ``server
status`` samples, from the agents' own start and end times, and by replaying the
event log (FIFO per provider too); every agent ended; no worker, claim guard, CLI
process or agent pane left once the workers stop.

Planted (2026-12-06): a dependant's checkout from HEAD again (item 2's ``opts["base"]``
dropped in orcr_tasks/checkouts.py) -> fails (run at 6 tasks: the dependant rejected
three times, "in failed/: ['t06']"); the global cap one too high in admission
(``config.cap() + 1`` in orcr_core/agents/queue.py ``promote``) -> fails in 58 s ("5
agents live at once, over the cap 4"). Item 1's race (1 run in 7 at 24 tasks) was not
planted: a run this size would rarely hit it; its own tests do.

Figures (wall time, agents, peak TUI memory, server CPU, load) are printed and written
to ``$ORCR_FLEET_FIGURES`` when set (docs/providers/real-cli.md):
``ORCR_FLEET_FIGURES=/tmp/playbook.json scripts/provider-smoke all -- -k playbook -s -n0``;
``ORCR_PLAYBOOK_TASKS=24`` for a larger run by hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from orcr_tasks.queue import Queue
from real_cli import fleet
from real_cli.enters import accepted, late, resubmits
from real_cli.fleet import CLAUDE, CODEX
from real_cli.playbook import (
    ASKS,
    QUESTION,
    WRONG,
    Model,
    Watch,
    epoch,
    git,
    make_repo,
    overlap,
    stray,
    tid,
)
from real_cli.scenarios import procs_under

from orcr_core.kit.testing import until
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client

CAP, CAPS = 4, {CLAUDE: 3, CODEX: 2}
BUILDERS, VERIFIERS = 5, 2


def _tasks() -> int:
    n = int(os.environ.get("ORCR_PLAYBOOK_TASKS") or 8)
    assert n >= 7, f"ORCR_PLAYBOOK_TASKS={n}: at least 7 (the cap filled, a question, a dependant)"
    return n


#: seconds for every task to be done: 600 for the default 8, 75 more per task past it
DONE_WITHIN = 600 + 75 * max(0, int(os.environ.get("ORCR_PLAYBOOK_TASKS") or 8) - 8)


@pytest.mark.timeout(DONE_WITHIN + 300)
@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_the_playbook_at_scale_with_both_real_clis(real):
    n = _tasks()
    ids = [tid(i) for i in range(1, n + 1)]
    last = ids[-1]
    out = real.tmp / "verdicts"
    out.mkdir()
    model = Model(n, out)
    # the shell tool pre-allowed (Claude Code: a Bash rule; Codex: never asks, no sandbox)
    settings = {"permissions": {"allow": ["Bash"], "defaultMode": "default"},
                "disableAutoMode": "disable"}  # fmt: skip
    f = fleet.start(
        real, model, model,
        extra=f"[concurrency]\nmax = {CAP}\nclaude = {CAPS[CLAUDE]}\ncodex = {CAPS[CODEX]}\n"
        f'[worktrees]\ndir = "{real.tmp / "checkouts"}"\n',
        settings=settings,
        codex_config='approval_policy = "never"\nsandbox_mode = "danger-full-access"\n',
        table="trust_cwd = true\n",
    )  # fmt: skip
    home = real.home
    make_repo(real.cwd)
    q = Queue.init(real.tmp / "queue")
    qdir = str(q.root)
    for i, t in enumerate(ids, 1):
        deps = ["--depends-on", WRONG] if t == last else []
        real.orcr("tasks", "add", qdir, "--id", t, "--provider", CLAUDE if i % 2 else CODEX,
                  "--done-when", f"python3 -m unittest tests.test_{t} passes", *deps, "--",
                  f"Build {t}: calc/{t}.py with value(), and its unit test tests/test_{t}.py.")  # fmt: skip
    load_before = os.getloadavg()
    began = time.monotonic()
    figures = fleet.Figures(home.proc.pid)
    figures.burst_begins()
    watch = Watch(home, home.socket).start()
    logs = {role: real.tmp / f"{role}.log" for role in ("builder", "verifier")}
    workers = {}
    for role, slots, extra in (("builder", BUILDERS, []),
                               ("verifier", VERIFIERS, ["--provider", CLAUDE, "--provider", CODEX])):  # fmt: skip
        with open(logs[role], "w") as log:
            workers[role] = subprocess.Popen(
                [sys.executable, "-m", "orcr_core.cli", "tasks", "work", qdir, "--role", role,
                 "--slots", str(slots), "--worktree", "--cwd", str(real.cwd),
                 "--heartbeat", "2s", "--timeout", "10m", *extra],
                env=home.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def told() -> str:
        return "\n".join(f"--- {r}\n{p.read_text()[-4000:]}" for r, p in logs.items())

    try:
        # the global cap filled with builders whose first model request waits, and one
        # more builder's agent queued behind them: the cap holds under pressure
        until(lambda: len(model.arrived) >= CAP and watch.live >= CAP
              and (watch.queued or watch.live > CAP), 300,
              "the cap filled with working builders, one more queued")  # fmt: skip
        assert watch.peak == CAP, f"{watch.peak} agents live at once, over the cap {CAP}"
        model.gate.set()
        until(lambda: q.is_in("inbox", ASKS), 300, f"{ASKS} parked")
        real.orcr("tasks", "answer", qdir, ASKS, "Yes: t02's value() is 2.")
        try:
            # a task in failed/ (three attempts gone) ends the wait: it never gets done
            until(lambda: len(q.ids("done")) == n or q.ids("failed"), DONE_WITHIN, "all done")
            assert len(q.ids("done")) == n, f"in failed/: {q.ids('failed')}"
        except AssertionError as exc:
            states = {s: q.ids(s) for s in ("backlog", "todo", "doing", "review", "verifying",
                                            "inbox", "failed", "done")}  # fmt: skip
            raise AssertionError(f"{exc}: {states}\n{told()}") from None
        wall = time.monotonic() - began
    finally:
        for w in workers.values():
            if w.poll() is None:
                w.send_signal(signal.SIGINT)
        for w in workers.values():
            w.wait(60)
        watch.stop()
    figures.burst_ends("playbook")

    # -- every task done with exactly the attempts planned; no claim lost or doubled
    with Orcr(Client(home.socket, autostart=False)) as o:
        until(lambda: all(a["status"] == "ended" for a in o.list(prefix="tasks/", all=True)),
              120, "every agent ended")  # fmt: skip
        agents = o.list(prefix="tasks/", all=True)
    log = told()
    # (a claim guard may end an agent its worker was ending as its task left doing/:
    # "ended ... its claim was reaped or taken over", with no claim reaped; counted below)
    for bad in ("the claim was reaped", "heartbeat stale", "leaving it to the reaper",
                "could not run", "attempt failed", "no VERDICT line", "no revision to check out",
                "unverifiable", "refused ("):  # fmt: skip
        assert bad not in log, log
    guard_ended = [line for line in log.splitlines() if "[guard " in line]
    tasks = {t: q.read("done", t) for t in ids}
    for t, task in tasks.items():
        assert task.attempts == (1 if t == WRONG else 0), (t, task.body)
        for section in ("## Attempt failed", "## Verification", "## Unverifiable", "## Refused"):
            assert section not in task.body, (t, task.body)
    assert tasks[WRONG].body.count("## Reject") == 1 and "its unit test fails" in tasks[WRONG].body
    assert "## Question" in tasks[ASKS].body and QUESTION in tasks[ASKS].body
    assert "## Answer" in tasks[ASKS].body
    assert tasks[WRONG].meta["built_by"] != tasks[WRONG].meta["passes"][0]
    # the dependant was built on t01's verified revision
    git(real.cwd, "merge-base", "--is-ancestor", tasks[WRONG].meta["revision"],
        tasks[last].meta["revision"])  # fmt: skip
    per: dict[tuple[str, str], int] = {}
    for a in agents:
        t, kind = a["path"].split("/")[2], a["path"].split("/")[3].split("_")[0]
        per[(t, kind)] = per.get((t, kind), 0) + 1
    planned = {(t, k): 1 + (t == WRONG or (t == ASKS and k == "build")) for t in ids
               for k in ("build", "verify")}  # fmt: skip
    planned[(ASKS, "verify")] = 1
    assert per == planned, (per, planned)

    # -- each prompt reached its model once; no Enter after its agent's turn began
    after, decisions, problems = {}, {}, []
    for a in agents:
        t, kind = a["path"].split("/")[2], a["path"].split("/")[3].split("_")[0]
        marker = f"Verify task {t}:" if kind == "verify" else f"This is task {t} of the task queue"
        fake = f.model(a["provider"])
        asked = [r for r in fake.conversation()
                 if r.index == 0 and marker in (r.prompt or "")
                 and epoch(a["started_at"]) - 1 <= r.at <= epoch(a["ended_at"]) + 1]  # fmt: skip
        assert asked, (a["path"], real.why(a["path"]))
        problems += fake.once_problems([asked[0].prompt])
        signs = [asked[0].at]
        if a["provider"] == CLAUDE and a.get("agent_session"):
            took = accepted(real, a["agent_session"]["value"], marker)
            signs += [took] if took else []
        events = home.events(a["uuid"])
        after[a["path"]] = late(events, min(signs))
        decisions[a["path"]] = resubmits(events)
    assert problems == [], problems
    assert {p: v for p, v in after.items() if v} == {}, (after, decisions)

    # -- the caps: reached and never exceeded, sampled and from the agents' own times
    peak, peaks = overlap(agents)
    fleet.replay(home.events(), CAP, CAPS)
    assert (watch.peak, peak) == (CAP, CAP), (watch.peak, peak, watch.peaks, peaks)
    for p, cap in CAPS.items():
        assert watch.peaks.get(p, 0) <= cap and peaks.get(p, 0) <= cap, (p, watch.peaks, peaks)

    # -- nothing of the run left: workers, claim guards, the CLIs, Codex's daemons, panes
    left: list[str] = []

    def gone() -> bool:
        under = [f"{p} (under the CLIs' home)" for p in procs_under(real.cli_home)]
        left[:] = stray(home, real.bin.parent) + under
        return not left

    try:
        until(gone, 120, "no process of the run left")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {left}") from None

    figures.data.update(
        tasks=n, agents=len(agents), wall_seconds=round(wall, 1),
        agents_per_provider={p: sum(a["provider"] == p for a in agents) for p in (CLAUDE, CODEX)},
        peak_live={"sampled": watch.peak, "from_times": peak, "per_provider_sampled": watch.peaks,
                   "per_provider_from_times": peaks},
        peak_tui_rss_mib={p: round(b / 2**20) for p, b in watch.rss.items()},
        load_average_before=[round(x, 2) for x in load_before], samples=watch.samples,
        guard_ended=len(guard_ended),
        resubmit_decisions=sorted({d for v in decisions.values() for d in v}),
    )  # fmt: skip
    figures.save()
