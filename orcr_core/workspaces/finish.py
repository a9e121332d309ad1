"""When an agent ends: keep its checkout or remove it, never losing a commit.

An ended row whose checkout is still ``requested`` or ``created`` is finished
here, on the pipeline pool (one job per agent): the monitor sweeps for such rows
after every write and the server at its start, so a crash anywhere is finished
by the next sweep.

- ``requested``: the agent never ran in it; whatever was made of it (a
  half-made checkout, its branch still at the base revision) is removed.
- ``created``: kept (``worktree.kept``) if it holds uncommitted or untracked
  files or commits that are on no other branch, tag or remote; else removed
  (``worktree.removed``) with its branch, which is deleted only if it still
  points where it pointed when it was found empty. git's own ``worktree
  remove`` (no ``--force``) refuses a dirty checkout as a second guard.

Only checkouts an agent row records are ever removed: orcr made them.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING

from orcr_core.store import events, faults
from orcr_core.store.models import Agent, db
from orcr_core.workspaces import plan, vcs

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.workspaces")

_OPEN = (
    "SELECT uuid FROM agent WHERE worktree_state IN ('requested', 'created') AND status = 'ended'"
)


def sweep(server: ServerContext) -> None:
    """Finish the checkout of every ended agent that still has one open."""
    for (uuid,) in db.execute_sql(_OPEN).fetchall():
        server.start_pipeline(uuid, finalize)


def _settle(agent: Agent, wt: dict, state: str, reason: str, **data) -> None:
    wt["reason"] = reason
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.worktree_state not in plan.OPEN:
            return  # finished already (a second sweep's job)
        Agent.update(worktree=json.dumps(wt), worktree_state=state).where(
            Agent.id == agent.id
        ).execute()
        events.emit(
            f"worktree.{state}",
            agent.uuid,
            path=agent.path,
            worktree=wt["path"],
            branch=wt.get("branch"),
            reason=reason,
            **data,
        )


def finalize(server: ServerContext, uuid: str) -> None:
    agent = Agent.get_or_none(Agent.uuid == uuid)
    if agent is None or agent.status != "ended" or agent.worktree_state not in plan.OPEN:
        return
    wt = plan.load(agent)
    backend = vcs.BACKENDS[wt["kind"]]
    root, dest, branch = wt["repo"], wt["path"], wt.get("branch")
    try:
        if not os.path.isdir(root):
            _settle(agent, wt, "kept", f"its repository {root} is gone; nothing was touched")
            return
        with vcs.repo_lock(backend.lock_key(root)):
            if agent.worktree_state == "requested":
                faults.point("worktree_discarding")
                backend.discard(root, dest, branch, wt.get("base_commit"))
                _settle(agent, wt, "removed", "the agent ended before its checkout was ready")
                return
            decide(agent, wt, backend)
    except vcs.VcsError as exc:
        log.warning("agent %s: checkout %s not finished: %s", agent.path, dest, exc)
        _settle(agent, wt, "kept", f"could not check it: {exc}")


def decide(agent: Agent, wt: dict, backend) -> None:
    """Keep or remove a made checkout (under the repository's lock)."""
    root, dest, branch = wt["repo"], wt["path"], wt.get("branch")
    if not os.path.isdir(dest):
        # removed outside orcr, or by a removal a crash cut short: its branch
        # goes only if it holds nothing that is on no other branch
        tip = backend.branch_tip(root, branch) if branch else None
        held = backend.holdings(root, root, branch) if tip else vcs.Holdings()
        if tip and held.commits:
            reason = f"its checkout is gone; branch {branch} keeps {len(held.commits)} commits"
        else:
            backend.remove(root, dest, branch, tip)
            reason = "its checkout is gone"
        _settle(agent, wt, "removed", reason)
        return
    held = backend.holdings(root, dest, branch)
    why = held.reason(branch)
    if why:
        _settle(agent, wt, "kept", why, changed=len(held.changed), commits=len(held.commits))
        return
    tip = backend.branch_tip(root, branch) if branch else None
    faults.point("worktree_removing")
    backend.remove(root, dest, branch, tip)
    _settle(agent, wt, "removed", "it held nothing that is not on another branch")


def remove_kept(agent: Agent, force: bool, prune: bool = False, dry_run: bool = False) -> dict:
    """``orcr worktree rm``: remove an ended agent's kept checkout on request.

    Refused while it holds changes or commits unless ``force``; even then a
    branch with commits on no other branch is kept (only files are discarded).
    ``prune`` (``orcr worktree prune``) refuses changed files only: a checkout
    whose work is all committed goes, its branch staying while it holds commits
    on no other branch (recorded) and going when they are on another (merged);
    ``dry_run`` says what would happen and changes nothing."""
    wt = plan.load(agent)
    if wt is None:
        raise vcs.VcsError(f"agent {agent.path} has no checkout", "no_worktree")
    if agent.status != "ended":
        raise vcs.VcsError(
            f"agent {agent.path} is {agent.status}; its checkout is removed only once it "
            "ended (orcr agent kill first)",
            "agent_active",
        )
    if agent.worktree_state != "kept":
        raise vcs.VcsError(
            f"the checkout of {agent.path} is {agent.worktree_state}, not kept", "not_kept"
        )
    backend = vcs.BACKENDS[wt["kind"]]
    root, dest, branch = wt["repo"], wt["path"], wt.get("branch")
    with vcs.repo_lock(backend.lock_key(root)):
        held = backend.holdings(root, dest, branch) if os.path.isdir(dest) else vcs.Holdings()
        why = vcs.Holdings(changed=held.changed).reason(branch) if prune else held.reason(branch)
        if why and not force:
            raise vcs.VcsError(
                f"the checkout {dest} holds {why}; commit or merge them first, or give "
                "--force to discard its files (a branch with commits is kept either way)",
                "worktree_holds_work",
            )
        tip = backend.branch_tip(root, branch) if branch else None
        if dry_run:
            pass
        elif os.path.isdir(dest):
            if held.changed:
                backend.discard(root, dest, None, None)  # files only: the branch stays
            backend.remove(root, dest, branch, None if held.commits else tip)
        else:
            backend.remove(root, dest, branch, tip)
    kept_branch = bool(held.commits)
    reason = ("pruned" if prune else "removed on request") + (
        f"; branch {branch} keeps {len(held.commits)} commits" if kept_branch else ""
    )
    out = {"path": agent.path, "worktree": dest, "branch": branch, "branch_kept": kept_branch}
    if dry_run:
        return dict(out, reason=reason, dry_run=True)
    wt["reason"] = reason
    with db.atomic("IMMEDIATE"):
        Agent.update(worktree=json.dumps(wt), worktree_state="removed").where(
            Agent.id == agent.id
        ).execute()
        events.emit(
            "worktree.removed", agent.uuid, path=agent.path, worktree=dest, branch=branch,
            reason=reason, forced=force,
        )  # fmt: skip
    return dict(out, reason=reason)


def prune(dry_run: bool = False) -> dict:
    """``orcr worktree prune``: remove every kept checkout of an ended agent whose work is
    all on its branch (:func:`remove_kept` with ``prune``); one that holds uncommitted
    or untracked files is left, with why, for ``orcr worktree rm --force``."""
    pruned, left = [], []
    rows = Agent.select().where(Agent.worktree_state == "kept", Agent.status == "ended")
    for agent in rows.order_by(Agent.id):
        try:
            pruned.append(remove_kept(agent, force=False, prune=True, dry_run=dry_run))
        except vcs.VcsError as exc:
            wt = plan.load(agent) or {}
            left.append({"path": agent.path, "worktree": wt.get("path"), "reason": str(exc)})
    return {"pruned": pruned, "left": left, "dry_run": dry_run}
