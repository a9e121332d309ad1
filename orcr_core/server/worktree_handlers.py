"""Socket methods ``worktree.list``, ``worktree.remove`` and ``worktree.prune`` (registered in
the route table, :mod:`orcr_core.server.routes`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from orcr_core.server.routes import route
from orcr_core.store.models import Agent
from orcr_core.workspaces import finish, plan, vcs

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def _entry(agent: Agent, look: bool) -> dict:
    wt = plan.public(agent)
    entry = {"agent": agent.path, "uuid": agent.uuid, "status": agent.status, **wt}
    entry["exists"] = os.path.isdir(wt["path"])
    if look and entry["exists"] and agent.worktree_state in ("created", "kept"):
        try:
            held = vcs.BACKENDS[wt["kind"]].holdings(wt["repo"], wt["path"], wt["branch"])
            entry["holds"] = held.reason(wt["branch"]) or "nothing new"
        except vcs.VcsError as exc:
            entry["holds"] = f"unknown: {exc}"
    return entry


@route("worktree.list", short=True, errors=(vcs.VcsError,))
def worktree_list(server: ServerContext, params):
    """Every checkout orcr made and still knows of (``all``: removed ones too)."""
    rows = Agent.select().where(Agent.worktree.is_null(False)).order_by(Agent.id)
    if not params.get("all"):
        rows = rows.where(Agent.worktree_state != "removed")
    return {"worktrees": [_entry(a, look=True) for a in rows]}


def _find(target: str) -> Agent:
    """An agent by uuid or path (the newest row), or by its checkout's directory."""
    row = Agent.get_or_none(Agent.uuid == target)
    if row is None:
        row = Agent.select().where(Agent.path == target).order_by(Agent.id.desc()).first()
    if row is None:
        want = os.path.realpath(target)
        for a in Agent.select().where(Agent.worktree.is_null(False)).order_by(Agent.id.desc()):
            if os.path.realpath(plan.load(a)["path"]) == want:
                return a
        raise vcs.VcsError(
            f"no agent or orcr-made checkout {target!r} (orcr worktree ls lists them)", "not_found"
        )
    return row


@route("worktree.remove", short=True, errors=(vcs.VcsError,))
def worktree_remove(server: ServerContext, params):
    target = params.get("target")
    if not isinstance(target, str) or not target:
        raise vcs.VcsError("missing parameter 'target' (an agent or a checkout)", "invalid_params")
    return finish.remove_kept(_find(target), force=bool(params.get("force")))


@route("worktree.prune", short=True, errors=(vcs.VcsError,))
def worktree_prune(server: ServerContext, params):
    dry_run = params.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise vcs.VcsError("parameter 'dry_run' must be true or false", "invalid_params")
    return finish.prune(dry_run=dry_run)
