"""The public Python SDK: the same client the CLI uses.

from orcr_core.sdk import Orcr

with Orcr() as orcr:
    agent = orcr.run("summarise README.md", provider="claude", path="docs/summary")
    orcr.wait(agent["uuid"])
    print(orcr.read(agent["uuid"])["text"])
"""

from __future__ import annotations

import builtins
from collections import deque

from orcr_core.sdk.client import Client, ServerError
from orcr_core.sdk.params import check_prompt, loop_params, run_params, scope_hint, scoped
from orcr_core.sdk.waiting import BAD_ENDINGS, AgentEnded, WaitTimeout, wait_for
from orcr_core.sdk.watch import Watcher

__all__ = [
    "BAD_ENDINGS",
    "AgentEnded",
    "Client",
    "Orcr",
    "ServerError",
    "WaitTimeout",
    "check_prompt",
    "scoped",
]

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start
if TYPE_CHECKING:
    from collections.abc import Iterator


class Orcr:
    """A connection to the orcr server (started in the background when none runs)."""

    def __init__(self, client: Client | None = None):
        self.client = client or Client()

    def __enter__(self) -> Orcr:
        self.client.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def close(self) -> None:
        self.client.close()

    def run(
        self,
        prompt: str | None = None,
        *,
        provider: str | None = None,
        path: str | None = None,
        name: str | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        argv: list[str] | None = None,
        scope: str | None = None,
        worktree: bool = False,
        branch: str | None = None,
        base: str | None = None,
        model: str | None = None,
        args: list[str] | None = None,
        rm: bool | None = None,
        gc_after: float | None = None,
        sandbox: bool | None = None,
        allow_net: list[str] | None = None,
        limits: dict | None = None,
    ) -> dict:
        """Admit an agent; returns ``{path, uuid, status, queue_seq}`` at once.

        ``sandbox``: run it in a sandbox (docs/sandbox.md); None: ``[sandbox] default``.
        ``allow_net``: its sandbox's ``allow_net`` (hosts, ``host:port``), over the
        config's and the provider's. From inside a sandboxed agent it is sandboxed and
        no wider than that agent (``sandbox_wider`` otherwise).

        ``rm``: a job: it ends ``done`` with its first turn (None: ``[agent] rm``);
        ``gc_after``: seconds idle before it ends ``gc`` (over ``timings.gc_after``).
        ``limits``: this run's ceilings, over ``[limits]`` (docs/ceilings.md):
        ``{"memory_max": "512MiB", "memory_high": ..., "pids_max": 256, "cpu_weight": 50}``.

        ``worktree``: its own checkout of the repository ``cwd`` is in (a git
        worktree on ``branch``, default ``orcr/<path>``, from ``base``, default
        HEAD; or a jj workspace). ``model`` and ``args`` are this run's provider
        options, over ``[providers.<name>] model`` and added to ``extra_args``."""
        params = run_params(
            prompt,
            provider=provider,
            path=path,
            name=name,
            cwd=cwd,
            timeout=timeout,
            argv=argv,
            scope=scope,
            worktree=worktree,
            branch=branch,
            base=base,
            model=model,
            args=args,
            rm=rm,
            gc_after=gc_after,
            sandbox=sandbox,
            allow_net=allow_net,
            limits=limits,
        )
        return self.client.call("agent.run", **params)

    def run_many(self, specs: list[dict], window: int = 64) -> list[dict]:
        """Admit many agents over this connection, pipelined: up to ``window``
        requests are in flight before their replies are read. Each spec holds the
        keyword arguments of :meth:`run`. Replies come back in order; a refused
        admission is returned as ``{"error": {code, message}}`` in its place.

        Requests go out half a window per write, so the server finds several
        buffered at once and admits them in one group commit (one set of fsyncs
        for all of them); sent one by one, a client that waits on a reply and
        then sends one request would let the server see one at a time.
        """
        c = self.client
        if c.sock is None:
            c.connect()
        results: list[dict] = [{}] * len(specs)
        pending: deque[tuple[int, int]] = deque()  # (index in specs, request id)
        batch: list[tuple[int, dict]] = []
        half = max(window // 2, 1)

        def collect() -> None:
            i, rid = pending.popleft()
            msg = c.recv()
            if msg.get("id") != rid:
                raise ServerError("protocol_error", f"reply id {msg.get('id')} for request {rid}")
            results[i] = msg["result"] if "result" in msg else {"error": msg["error"]}

        def flush() -> None:
            while pending and len(pending) + len(batch) > window:
                collect()
            rids = c.send_many("agent.run", [p for _, p in batch])
            pending.extend(zip((i for i, _ in batch), rids, strict=True))
            batch.clear()

        for i, spec in enumerate(specs):
            try:
                batch.append((i, run_params(**spec)))
            except ServerError as exc:  # refused before sending, in its place
                results[i] = {"error": {"code": exc.code, "message": exc.message}}
                continue
            if len(batch) >= half:
                flush()
        if batch:
            flush()
        while pending:
            collect()
        return results

    def _call(self, method: str, target: str, **params):
        """``method`` on ``target`` as seen from the caller's scope (:func:`scoped`)."""
        full = scoped(target)
        try:
            return self.client.call(method, target=full, **params)
        except ServerError as exc:
            if exc.code == "not_found" and full != target:
                exc.message = scope_hint(exc.message, target, full)
                exc.args = (exc.message,)
            raise

    def get(self, target: str) -> dict:
        return self._call("agent.get", target)["agent"]

    def usage(
        self, prefix: str | None = None, since: float | None = None, by: str | None = None
    ) -> dict:
        """Tokens spent under the path ``prefix`` since ``since`` (epoch seconds), grouped
        ``by`` path, provider, model, loop or day: ``{"groups", "total", "by"}``."""
        return self.client.call("usage.sum", prefix=prefix, since=since, by=by)

    def worktrees(self, all: bool = False) -> list[dict]:
        """The checkouts orcr made for agents (``all``: removed ones too)."""
        return self.client.call("worktree.list", all=all)["worktrees"]

    def remove_worktree(self, target: str, force: bool = False) -> dict:
        """Remove an ended agent's kept checkout (refused while it holds work, unless ``force``)."""
        return self.client.call("worktree.remove", target=target, force=force)

    def prune_worktrees(self, dry_run: bool = False) -> dict:
        """Remove the kept checkouts of ended agents whose work is all on their branch:
        ``{"pruned": [...], "left": [...], "dry_run"}`` (``dry_run``: change nothing)."""
        return self.client.call("worktree.prune", dry_run=dry_run)

    # past this method, `list` in the class body names it: annotations say builtins.list
    def list(self, prefix: str | None = None, all: bool = False) -> list[dict]:
        return self.client.call("agent.list", prefix=prefix, all=all)["agents"]

    def unmanaged(self, all: bool = False) -> builtins.list[dict]:
        """Agents herdr detects in your other herdr sessions (``all``: ended ones too).
        orcr lists them and never acts on them."""
        return self.client.call("unmanaged.list", all=all)["unmanaged"]

    def kill(self, target: str) -> builtins.list[dict]:
        return self._call("agent.kill", target)["killed"]

    def kill_matches(self, target: str) -> builtins.list[dict]:
        """The agents ``kill(target)`` would kill now (``{path, uuid, status}``), killing none."""
        return self._call("agent.kill", target, dry_run=True)["matches"]

    def resume(self, target: str) -> dict:
        """Start a lost agent (or one that ended lost or exited) again in its own session."""
        return self._call("agent.resume", target)["agent"]

    def send(self, target: str, prompt: str, timeout: float | None = None) -> dict:
        check_prompt(prompt)
        return self._call("agent.send", target, prompt=prompt, timeout=timeout)["agent"]

    def keys(self, target: str, keys: builtins.list[str]) -> dict:
        """Press ``keys`` (``enter``, ``down``, ``ctrl+c``, a character) in the agent's pane."""
        return self._call("agent.keys", target, keys=list(keys))

    def read(self, target: str, last: bool = False) -> dict:
        """The last ended turn's answer (``text``) or ``error``.

        While a turn runs this raises ``turn_running`` unless ``last`` asks for
        the previous answer.
        """
        return self._call("agent.read", target, last=last)

    def status(self) -> dict:
        return self.client.call("server.status")

    # -- loops ------------------------------------------------------------
    def loop_create(
        self,
        name: str,
        argv: builtins.list[str],
        *,
        cron: str | None = None,
        once_at: str | float | None = None,
        tz: str | None = None,
        overlap: str = "queue",
        max_concurrency: int = 1,
        timeout: float | None = None,
        cwd: str | None = None,
        keep_agents: bool = False,
        env: dict[str, str] | None = None,
    ) -> dict:
        """Create a loop firing ``argv`` on ``cron`` (or once, at ``once_at``: ``30m``,
        RFC 3339, a local ``YYYY-MM-DD HH:MM``, or UTC seconds). ``tz`` defaults to
        this machine's zone. A loop is global: ``$ORCR_PATH`` is never applied.
        Runs get this process's ``PATH`` and ``env`` on top of the server's
        environment; ``keep_agents`` lets a run's agents outlive its exit."""
        params = loop_params(
            name,
            argv,
            cron=cron,
            once_at=once_at,
            tz=tz,
            overlap=overlap,
            max_concurrency=max_concurrency,
            timeout=timeout,
            cwd=cwd,
            keep_agents=keep_agents,
            env=env,
        )
        return self.client.call("loop.create", **params)["loop"]

    def loop_get(self, name: str) -> dict:
        return self.client.call("loop.get", target=name)["loop"]

    def loop_list(self, all: bool = False) -> builtins.list[dict]:
        return self.client.call("loop.list", all=all)["loops"]

    def loop_pause(self, name: str) -> dict:
        return self.client.call("loop.pause", target=name)["loop"]

    def loop_resume(self, name: str) -> dict:
        return self.client.call("loop.resume", target=name)["loop"]

    def loop_rm(self, name: str) -> dict:
        return self.client.call("loop.rm", target=name)

    def loop_logs(
        self, name: str, run: str | None = None, source: str = "orcr", since_seq: int = 0
    ) -> dict:
        """``source="orcr"``: the scheduler's event rows; ``"run"``: each run's log file."""
        return self.client.call(
            "loop.logs", target=name, run=run, source=source, since_seq=since_seq
        )

    def loop_run_start(self, name: str) -> dict:
        """Allocate a manual run (it starts when a slot is free): ``{path, uuid, ...}``."""
        return self.client.call("loop.run.start", target=name)["run"]

    def loop_run_stop(self, target: str, wait: bool = False) -> builtins.list[dict]:
        """Stop ``NAME/RUN_ID`` (or every unfinished run of ``NAME``); ``wait`` returns
        once the stop path has finished."""
        return self.client.call("loop.run.stop", target=target, wait=wait)["stopped"]

    def loop_run_list(self, name: str) -> builtins.list[dict]:
        return self.client.call("loop.run.list", target=name)["runs"]

    @staticmethod
    def loop_next(
        cron: str, tz: str | None = None, start: str | float | None = None, count: int = 5
    ) -> builtins.list[str]:
        """The next ``count`` fires after ``start`` (default now), UTC ISO 8601 with a
        ``Z``. Computed here; nothing is created."""
        import time as _time

        from orcr_core.loops import cadence
        from orcr_core.loops.zone import local_zone_name

        tz = tz or local_zone_name()
        cadence.zone(tz)
        expr = cadence.validate_cron(cron)
        if start is None:
            after = _time.time()
        elif isinstance(start, int | float):
            after = float(start)
        else:
            after = cadence.parse_when(start, tz)
        return [cadence.iso_utc(t) for t in cadence.fires(expr, tz, after, count)]

    def watch(self, target: str | None = None, on_reconnect=None) -> tuple[dict, Iterator[dict]]:
        """A snapshot (``snapshot_seq``, ``agents``) and every later event.

        Uses its own connection, so the SDK object stays usable meanwhile. The
        events go on across a server restart: the watch reconnects and resumes
        from its last seq; if that fell out of retention it yields a
        ``watch.snapshot`` pseudo-event whose ``data`` is a fresh snapshot
        (see :mod:`orcr_core.sdk.watch`). ``on_reconnect(exc)`` is called when the
        connection drops.
        """
        target = scoped(target) if target else target
        w = Watcher(self.client.path, self.client.autostart, target, on_reconnect=on_reconnect)
        return w.snapshot, iter(w)

    def wait(
        self, target: str, until: str = "idle", timeout: float | None = None, on_change=None
    ) -> dict:
        """Block until the agent is ``idle`` (or ``ended``); raise on timeout or a bad ending.

        A queued agent is waited through promotion and its first turn; a server
        restart meanwhile is ridden out (the watch reconnects and resumes). The agent
        returned says how its last turn ended: ``turn_status`` (``completed``,
        ``errored``, ``interrupted``; None when the provider has no transcript)
        and ``turn_error``.
        """
        return wait_for(self.client, target, until, timeout, on_change)
