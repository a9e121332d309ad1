"""The spawn pipeline's checkout step: durable state before the side effect.

The checkout's place was recorded at admission (row and launch.json, state
``requested``). This step resolves the base revision and the branch, records
both with ``worktree.requested`` before git or jj is called, makes the
checkout under the repository's lock, and records ``worktree.created``
(``state: created``) right after. ``cancel_requested`` is checked before and
after, like around every multiplexer call.

A crash between the two events leaves a row in ``requested`` that names what
may exist: recovery fails the start (no pane was ever recorded) and
:mod:`.finish` removes the half-made checkout and its branch (still at the base
revision: nothing of anyone's is in it), so either no checkout exists or
exactly one that its row knows.
"""

from __future__ import annotations

import json
import logging
import os
import time

from orcr_core.store import events, faults
from orcr_core.store.models import Agent, db
from orcr_core.workspaces import plan, vcs

log = logging.getLogger("orcr.workspaces")

#: default branch names tried after ``orcr/<path>`` is taken (a kept checkout of an
#: earlier agent at the same path holds it): ``orcr/<path>-2`` ... ``-<MAX_SUFFIX>``
MAX_SUFFIX = 100


def _record(agent: Agent, wt: dict, state: str, event: str | None, **data) -> None:
    # a progress marker too: the stuck-start guard counts from here
    Agent.update(worktree=json.dumps(wt), worktree_state=state, last_progress_at=time.time()).where(
        Agent.id == agent.id
    ).execute()
    agent.worktree, agent.worktree_state = json.dumps(wt), state
    if event:
        events.emit(event, agent.uuid, path=agent.path, **data)


def _branch(backend, wt: dict, agent: Agent) -> str:
    root = wt["repo"]
    if wt.get("branch_given"):
        why = backend.check_branch(root, wt["branch"])
        if why:
            raise vcs.VcsError(why, "branch_exists")
        return wt["branch"]
    base = plan.default_branch(agent.path)
    for n in range(1, MAX_SUFFIX + 1):
        name = base if n == 1 else f"{base}-{n}"
        if backend.check_branch(root, name) is None:
            return name
    raise vcs.VcsError(f"branches {base} to {base}-{MAX_SUFFIX} all exist; give --branch")


def pre_trust(agent: Agent, provider, spec) -> None:
    """A checkout just made is a folder the agent's CLI has never seen: when
    ``[providers.<name>] trust_cwd`` allows it and the adapter can (``pre_trust``),
    it is recorded as trusted before the CLI starts, so no trust dialog appears.
    A failure is logged: the dialog is then answered as for any folder."""
    hook = getattr(provider, "pre_trust", None)
    if (
        hook is None
        or agent.worktree_state != "created"
        or spec.options.get("trust_cwd") is not True
    ):
        return
    try:
        written = hook(spec)
    except OSError as exc:
        log.warning("agent %s: its checkout was not pre-trusted: %s", agent.path, exc)
        return
    if written:
        with db.atomic("IMMEDIATE"):
            events.emit(
                "worktree.trusted",
                agent.uuid,
                path=agent.path,
                cwd=agent.cwd,
                file=written,
                option=f"providers.{agent.provider}.trust_cwd",
            )


def ensure(agent: Agent, check) -> Agent:
    """Make the agent's checkout if its row asks for one; ``check`` re-reads the
    row and raises the pipeline's Canceled when it was canceled or ended."""
    if agent.worktree_state != "requested":
        return agent
    wt = plan.load(agent)
    backend = vcs.BACKENDS[wt["kind"]]
    root = wt["repo"]
    agent = check(agent)
    key = backend.lock_key(root)
    existing = False
    with vcs.repo_lock(key):
        if wt.get("base_commit"):
            # an earlier attempt got as far as its intent (or a resumed agent's checkout
            # was removed): whatever is there is half-made (no agent runs in it) and is
            # made again; a branch that moved on since its base (it holds commits) is
            # checked out as it is
            backend.discard(root, wt["path"], wt.get("branch"), wt["base_commit"])
            existing = backend.branch_tip(root, wt["branch"]) is not None
        else:
            wt["base_commit"] = backend.resolve(root, wt.get("base") or backend.default_base)
            wt["branch"] = _branch(backend, wt, agent)
        with db.atomic("IMMEDIATE"):
            agent = check(agent)
            _record(
                agent,
                wt,
                "requested",
                "worktree.requested",
                vcs=wt["kind"],
                repo=root,
                worktree=wt["path"],
                branch=wt["branch"],
                base=wt.get("base"),
                base_commit=wt["base_commit"],
            )
        faults.point("worktree_requested")
        backend.create(root, wt["path"], wt["branch"], wt["base_commit"], existing)
        faults.point("worktree_made")
    # the agent's directory inside the checkout (a directory the base revision
    # does not track, an empty or ignored one, is made)
    os.makedirs(agent.cwd, exist_ok=True)
    with db.atomic("IMMEDIATE"):
        agent = check(agent)  # ended meanwhile: finish.py removes the unused checkout
        _record(
            agent,
            wt,
            "created",
            "worktree.created",
            vcs=wt["kind"],
            worktree=wt["path"],
            branch=wt["branch"],
            base_commit=wt["base_commit"],
            cwd=agent.cwd,
        )
    return check(agent)
