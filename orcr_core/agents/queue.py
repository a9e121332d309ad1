"""Admission and FIFO promotion under the global and per-provider caps.

Both are single ``BEGIN IMMEDIATE`` transactions: the write lock is taken at
BEGIN, so the capacity recount and the status change see the same world and a
concurrent writer waits inside the busy timeout instead of failing mid-way.

Promotion order: rows are taken by ``queue_seq``. A row whose provider is at
its own cap is passed over (its provider is full, not the machine), but a row
never overtakes an earlier row that could take the same slot: within a
provider the order is strictly FIFO, and a freed global slot goes to the
oldest queued row whose provider has room.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path

from peewee import IntegrityError

from orcr_core import paths
from orcr_core.agents import lifecycle
from orcr_core.agents.runspec import (
    GC_AFTER_RANGE,
    AdmissionError,
    RunSpec,
    check_limits,
    clean_prompt,
    resolve_path,
    takers,
    validate_spec,
)
from orcr_core.common import clock
from orcr_core.config import Config
from orcr_core.sandbox import SandboxError
from orcr_core.sandbox import policy as sandbox_policy
from orcr_core.store import durable, events
from orcr_core.store.models import ACTIVE, LIVE, Agent, db
from orcr_core.workspaces import plan

MAX_QUEUE = 10_000


def _auto_name(scope: str | None, provider: str) -> str:
    prefix = paths.join(scope, provider + "_")
    taken = {
        r.path
        for r in Agent.select(Agent.path).where(
            Agent.path.startswith(prefix) & Agent.status.in_(ACTIVE)
        )
    }
    n = 1
    while f"{prefix}{n}" in taken:
        n += 1
    return f"{prefix}{n}"


def _write_launch(data_dir: str, payload: dict, sync: bool = True) -> None:
    """launch.json on disk (file and directory entries) before the row's commit."""
    durable.make_dir_with_file(data_dir, "launch.json", json.dumps(payload).encode(), sync=sync)


_DEPTH = "SELECT COUNT(*) FROM agent WHERE status = 'queued'"
_SEQS = (
    "SELECT (SELECT MAX(queue_seq) FROM agent), "
    "(SELECT MIN(queue_seq) FROM agent WHERE status = 'queued')"
)
_INSERT = (
    "INSERT INTO agent (uuid, path, name, provider, status, queue_seq, cwd, launch_token, timeout, "
    "created_at, worktree, worktree_state, model, run_args, rm, gc_after, "
    "managed, cancel_requested, turn, turns_done) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, 0, 0)"
)


def admit(
    spec: RunSpec,
    providers: dict,
    agents_dir: Path,
    options: dict | None = None,
    check: Callable[[str, str | None], tuple[str, str] | None] | None = None,
    config=None,
    sync: bool = True,
) -> dict:
    """Validate, write launch.json, insert the queued row. Returns the row's fields.

    ``sync=False`` leaves the fsyncs of launch.json, the new data dir and its entry
    in ``agents_dir`` to the caller, who must make them before the row's transaction
    commits: the listener's group commit makes them for the whole group at once
    (``durable.sync_dirs_with_file``).

    ``options`` are the provider's config options (``[providers.<name>]``).
    ``check(path, scope)`` runs inside the insert's transaction and returns
    ``(code, message)`` to refuse (the loop run barrier and reserved loop paths:
    nothing can change between the check and the insert).
    With ``spec.worktree`` the checkout is planned here and recorded in the row
    and launch.json (``requested``); the pipeline makes it (orcr_core/workspaces).
    """
    validate_spec(spec, providers, options)
    check_limits(spec, config)
    full, scope = resolve_path(spec)
    uuid = str(uuidlib.uuid4())
    data_dir = os.path.join(agents_dir, uuid)
    token = secrets.token_hex(16)
    now = clock.time()
    try:
        with db.write_or_savepoint("admit"):
            # plain SQL on the hot path: admission is the one write every caller makes
            last, oldest = db.execute_sql(_SEQS).fetchone()
            seq = (last or 0) + 1
            # seq - oldest bounds the depth in O(log n); count exactly only near the limit
            if oldest is not None and seq - oldest >= MAX_QUEUE:
                depth = db.execute_sql(_DEPTH).fetchone()[0]
                if depth >= MAX_QUEUE:
                    raise AdmissionError("queue_full", f"the queue holds {depth} agents, the limit")
            path = full or _auto_name(scope, spec.provider)
            refusal = check(path, scope) if check is not None else None
            if refusal is not None:
                raise AdmissionError(*refusal)
            worktree = None
            if spec.worktree:
                try:
                    worktree = plan.plan(spec.cwd, path, uuid, spec.branch, spec.base, config)
                except plan.PlanError as exc:
                    raise AdmissionError(exc.code, str(exc)) from None
            cwd = worktree["cwd"] if worktree else spec.cwd
            try:  # fail closed: asked for and impossible is refused, never run unconfined
                adapter = providers[spec.provider]
                sandbox = sandbox_policy.admission(
                    spec.sandbox, spec.provider, cwd, data_dir, config,
                    getattr(adapter, "sandbox_hosts", ()), allow_net=spec.allow_net,
                    parent=spec.parent, source_cwd=spec.cwd,
                    declared=lambda: sandbox_policy.declared(
                        adapter, uuid, path, cwd, data_dir, options),
                )  # fmt: skip
            except SandboxError as exc:
                raise AdmissionError(exc.code, str(exc)) from None
            run_args = json.dumps(spec.args) if spec.args is not None else None
            _write_launch(
                data_dir,
                {
                    "uuid": uuid,
                    "path": path,
                    "provider": spec.provider,
                    "cwd": cwd,
                    "prompt": spec.prompt,
                    "timeout": spec.timeout,
                    "argv": spec.argv,
                    "worktree": worktree,
                    "model": spec.model,
                    "args": spec.args,
                    "rm": spec.rm,
                    "gc_after": spec.gc_after,
                    "sandbox": sandbox,
                    "limits": spec.limits,
                    "launch_token": token,
                    "created_at": now,
                },
                sync=sync,
            )
            fields = dict(
                uuid=uuid,
                path=path,
                name=path.rsplit("/", 1)[-1],
                provider=spec.provider,
                status="queued",
                queue_seq=seq,
                cwd=cwd,
                launch_token=token,
                timeout=spec.timeout,
                created_at=now,
                worktree=json.dumps(worktree) if worktree else None,
                worktree_state="requested" if worktree else None,
                model=spec.model,
                run_args=run_args,
                rm=1 if spec.rm else 0,
                gc_after=spec.gc_after,
            )
            cur = db.execute_sql(_INSERT, tuple(fields.values()))
            events.emit("agent.queued", uuid, path=path, provider=spec.provider, queue_seq=seq)
    except IntegrityError:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise AdmissionError(
            "path_in_use",
            f"path {full!r} is in use by an active agent; pick another --path or kill it",
        ) from None
    except BaseException:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    fields["id"] = cur.lastrowid
    return fields


_LIVE_COUNTS = (
    "SELECT provider, COUNT(*) FROM agent WHERE managed = 1 AND status IN ({}) GROUP BY provider"
).format(", ".join(f"'{s}'" for s in LIVE))


def live_counts() -> dict[str, int]:
    """Live TUIs per provider: what holds a slot (``starting``, ``working``, ``idle``)."""
    return dict(db.execute_sql(_LIVE_COUNTS).fetchall())


def promote(config: Config, limit: int = 64, budget=None, gate=None, providers=None) -> list[Agent]:
    """Promote queued rows FIFO while both caps have room. One transaction.

    ``providers`` (the registered provider names, when given): a row whose provider is
    not installed (its plugin uninstalled since it was admitted) stays queued, held
    with that reason (:func:`held_reason`); the other providers' rows go on.

    A read-only look first: with no queued row or no free slot there is nothing
    to do, and the write lock is left to admissions. ``budget`` (a
    :class:`orcr_core.agents.memory.Budget`) is the memory the promotions may
    take: the first row that has a slot but whose estimated footprint the
    headroom does not cover stops the pass (no later row overtakes it).
    ``gate`` (a :class:`orcr_core.usage.budgets.Gate`) is measured inside the
    transaction: a row whose scope's token budget is spent is passed over, like
    a row whose provider is at its cap (FIFO kept within the scope).
    """
    promoted: list[Agent] = []
    if not db.execute_sql(_ANY_QUEUED).fetchone() or sum(live_counts().values()) >= config.cap():
        return promoted
    with db.atomic("IMMEDIATE"):
        counts = live_counts()
        free = config.cap() - sum(counts.values())
        if free <= 0:
            return promoted
        if gate:
            gate.measure()  # the spends as of this transaction: no turn's end can slip in
        full: set[str] = set()
        query = (
            Agent.select()
            .where((Agent.status == "queued") & (Agent.managed == True))  # noqa: E712
            .order_by(Agent.queue_seq)
        )
        for agent in query.iterator():
            if free <= 0 or len(promoted) >= limit:
                break
            if agent.provider in full:
                continue
            if providers is not None and agent.provider not in providers:
                full.add(agent.provider)  # held: its plugin is gone
                continue
            spend = gate.holds(agent.provider, agent.path) if gate else None
            if spend is not None:
                gate.announce(spend)  # budget.reached, once per scope and window
                continue  # its scope's budget is spent: held, FIFO kept within the scope
            cap = config.cap(agent.provider)
            if cap is not None and counts.get(agent.provider, 0) >= cap:
                full.add(agent.provider)
                continue
            if budget is not None and not budget.take(agent.provider):
                break  # held for memory: FIFO kept, no smaller row slips past it
            if lifecycle.transition(agent, "starting"):
                counts[agent.provider] = counts.get(agent.provider, 0) + 1
                free -= 1
                promoted.append(agent)
            elif budget is not None:
                budget.give_back(agent.provider)
    return promoted


_ANY_QUEUED = "SELECT 1 FROM agent WHERE status = 'queued' LIMIT 1"


def held_reason(provider: str, providers) -> str | None:
    """Why a queued row of ``provider`` cannot start, when its plugin is not installed."""
    if provider in providers:
        return None
    return (
        f"provider not installed: no plugin registers {provider!r} (installed: "
        f"{', '.join(sorted(providers)) or 'none'}); install it (orcr install ...) and "
        "restart the server (orcr server stop), or kill the agent"
    )


def cap_held(config: Config, provider: str, counts: dict[str, int]) -> str | None:
    """Why a queued row of ``provider`` waits on a cap, given the live ``counts``
    (:func:`live_counts`): ``cap global 4/4`` (checked first, as :func:`promote`
    does), ``cap echo 3/3``; None when both have room."""
    total, cap = sum(counts.values()), config.cap()
    if total >= cap:
        return f"cap global {total}/{cap}"
    own = config.cap(provider)
    if own is not None and counts.get(provider, 0) >= own:
        return f"cap {provider} {counts.get(provider, 0)}/{own}"
    return None


def any_queued() -> bool:
    return db.execute_sql(_ANY_QUEUED).fetchone() is not None


def queue_depth() -> int:
    return Agent.select().where(Agent.status == "queued").count()


#: the checks before admission's transaction live in orcr_core.agents.runspec; these
#: names stay importable from here (queue.RunSpec, queue.AdmissionError, ...)
__all__ = [
    "GC_AFTER_RANGE",
    "MAX_QUEUE",
    "AdmissionError",
    "RunSpec",
    "admit",
    "any_queued",
    "cap_held",
    "check_limits",
    "clean_prompt",
    "held_reason",
    "live_counts",
    "promote",
    "queue_depth",
    "resolve_path",
    "takers",
    "validate_spec",
]
