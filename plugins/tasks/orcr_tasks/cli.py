"""The ``orcr tasks`` command group (added through the ``register_commands`` hook)."""

from __future__ import annotations

import json as jsonlib
import os
import sys
from pathlib import Path

import click

from orcr_tasks.backend import is_url
from orcr_tasks.lock import LockBusy
from orcr_tasks.opener import init_queue, open_queue
from orcr_tasks.queue import MARKER, STATES, QueueError
from orcr_tasks.taskfile import TaskFileError

ENV = "ORCR_TASKS_DIR"
#: ``tasks work --timeout``: a hung model under a live worker must not hold its task forever
DEFAULT_TIMEOUT = "60m"
DIR_HELP = (
    f"DIR is the queue directory or a postgresql:// URL; it may be left out when ${ENV} names it."
)


def _duration(ctx, param, value):
    if value is None:
        return None
    from orcr_core.config import ConfigError, parse_duration

    try:
        seconds = parse_duration(value, param.name)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None
    if seconds <= 0:
        raise click.BadParameter(f"{value!r} must be longer than 0s")
    return seconds


def _open(path: str | None):
    if not path:
        raise click.UsageError(f"give the queue directory (DIR) first, or set {ENV}")
    try:
        return open_queue(path)
    except QueueError as exc:
        raise click.ClickException(str(exc)) from None


def repo_here() -> str | None:
    """The git repository the current directory is in (``dependants = landed``)."""
    from orcr_tasks.checkouts import repo_root

    return repo_root(os.getcwd())


def _split(args: tuple[str, ...], what: str) -> tuple[object, list[str]]:
    """``[DIR] REST...``: the first argument is the queue when it is one, else $ORCR_TASKS_DIR."""
    args = list(args)
    if args and (is_url(args[0]) or (Path(args[0]).expanduser() / MARKER).exists()):
        return _open(args[0]), args[1:]
    if os.environ.get(ENV):
        return _open(os.environ[ENV]), args
    if args and Path(args[0]).expanduser().is_dir():
        return _open(args[0]), args[1:]  # says why it is not a queue
    raise click.UsageError(f"give the queue directory before {what}, or set {ENV}")


def _errors(fn):
    """Expected failures as one-line errors (exit 1), never tracebacks."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except (QueueError, TaskFileError, LockBusy) as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper


queue_arg = click.argument("queue_dir", metavar="[DIR]", envvar=ENV, required=False)


def stale_option(help: str):
    """``--stale``: the heartbeat age past which a claim is stale (status, reap, work)."""
    return click.option("--stale", callback=_duration, default="10m", show_default=True, help=help)


@click.group(name="tasks")
def tasks():
    """A crash-safe task queue worked by orcr agents: a folder of task files, or a
    PostgreSQL table shared by several hosts (docs/tasks.md).

    A task's state is the folder its file is in (backlog/ todo/ doing/ review/
    verifying/ done/ failed/ inbox/ landing/ landed/), or its row's state on
    PostgreSQL. Builders claim from todo, verifiers from review, landers from done
    (a file by rename, a row with SKIP LOCKED); a stale heartbeat is reaped back.
    """


@tasks.command(name="init")
@click.argument("queue_dir", metavar="DIR")
@_errors
def tasks_init(queue_dir):
    """Create a queue at DIR (an absolute path outside every worktree and sync folder),
    or in PostgreSQL: postgresql://[USER@]HOST[:PORT]/DB?queue=NAME (docs/tasks.md)."""
    click.echo(init_queue(queue_dir).label)


@tasks.command(name="add", context_settings={"ignore_unknown_options": False})
@click.option("--id", "task_id", metavar="ID", help="Task id (default: T<n>).")
@click.option(
    "--done-when", required=True, metavar="TEXT", help="What would fail if it were wrong."
)
@click.option(
    "--depends-on", multiple=True, metavar="ID", help="Wait in backlog/ until ID is done."
)
@click.option("--cluster", metavar="NAME", help="Group for reject rates in status.")
@click.option("--provider", "-p", metavar="P", help="Provider for the builder of this task.")
@click.option(
    "--model", metavar="MODEL", help="Model of this task's agents (over tasks work --model)."
)
@click.option(
    "--verifiers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many verifiers must pass it (risk).",
)
@click.argument("args", nargs=-1, metavar="[DIR] -- TEXT...")
@_errors
def tasks_add(task_id, done_when, depends_on, cluster, provider, model, verifiers, args):
    """Write one task file into todo/ (backlog/ while a dependency is not done).

    TEXT is the task ('-' reads it from stdin). Prints "<id> <state>".
    """
    q, rest = _split(args, "the task text")
    if depends_on:  # dependants = landed checks the repository this runs in
        q.moves.repo = repo_here()
    text = " ".join(rest)
    if text == "-":
        text = sys.stdin.read()
    tid, state = q.add(
        text,
        done_when,
        task_id=task_id,
        depends_on=list(depends_on),
        cluster=cluster,
        provider=provider,
        verifiers=verifiers,
        model=model,
    )
    click.echo(f"{tid} {state}")


@tasks.command(name="ls")
@queue_arg
@click.option("--state", type=click.Choice(STATES), multiple=True, help="Only these states.")
@click.option("--json", "json_", is_flag=True)
@_errors
def tasks_ls(queue_dir, state, json_):
    """List tasks: id, state, attempts, cluster. A file that is not a readable task
    is listed as UNREADABLE with the reason (see `status`)."""
    q = _open(queue_dir)
    rows = []
    for s in state or STATES:
        for task, _st, tid, why in q.entries(s):
            rows.append(
                {
                    "id": tid,
                    "state": s,
                    "attempts": task.attempts if task else None,
                    "cluster": task.meta.get("cluster") if task else None,
                    "depends_on": task.depends_on if task else [],
                    "unreadable": why,
                }
            )
    if json_:
        click.echo(jsonlib.dumps(rows))
        return
    for r in rows:
        if r["unreadable"]:
            click.echo(f"{r['id']:<16} {r['state']:<10} UNREADABLE: {r['unreadable']}")
            continue
        deps = f" after {','.join(r['depends_on'])}" if r["depends_on"] else ""
        click.echo(
            f"{r['id']:<16} {r['state']:<10} attempts {r['attempts']} {r['cluster'] or '-'}{deps}"
        )


@tasks.command(name="show")
@click.argument("args", nargs=-1, metavar="[DIR] ID")
@click.option("--json", "json_", is_flag=True)
@_errors
def tasks_show(args, json_):
    """Print a task's file (its state and the tokens of each attempt on stderr)."""
    q, rest = _split(args, "the task id")
    if len(rest) != 1:
        raise click.UsageError("give one task id")
    from orcr_tasks import usage

    state = q.locate(rest[0])
    task = q.read(state, rest[0])
    spent = usage.of_task(q, task.id)  # its agents' tokens, per attempt (None: no server)
    if json_:
        report = q.results(task.id)
        root = q.local_root
        result = None if root is None or report is None else root / "results" / f"{task.id}.md"
        click.echo(
            jsonlib.dumps(
                {
                    "id": task.id,
                    "state": state,
                    "meta": task.meta,
                    "body": task.body,
                    "results": str(result) if result else None,
                    "results_text": report,
                    "usage": spent,
                },
            )
        )
        return
    click.echo(f"{task.id} is in {state}/", err=True)
    for line in usage.task_lines(spent):
        click.echo(line, err=True)
    click.echo(q.text(state, task.id), nl=False)


@tasks.command(name="path")
@click.argument("args", nargs=-1, metavar="[DIR] ID")
@_errors
def tasks_path(args):
    """Print the path of a task's file."""
    q, rest = _split(args, "the task id")
    if len(rest) != 1:
        raise click.UsageError("give one task id")
    if q.local_root is None:
        raise click.ClickException(
            f"{q.label} keeps its tasks in rows, not files: `orcr tasks show` prints one"
        )
    click.echo(str(q.file(q.locate(rest[0]), rest[0])))


@tasks.command(name="status")
@queue_arg
@stale_option("A heartbeat older than this is stale.")
@click.option("--json", "json_", is_flag=True)
@_errors
def tasks_status(queue_dir, stale, json_):
    """Counts per state, reject rate per cluster, stale heartbeats, attempts, the oldest
    task in each state, throughput over the last hour: all computed from the files; and the
    tokens the workers' agents spent, from the orcr server ('-' when none answers)."""
    from orcr_tasks import usage
    from orcr_tasks.status import compute, render

    q = _open(queue_dir)
    s = compute(q, stale)
    # the tokens its workers' agents spent, per task (None without a server)
    s["usage"] = usage.of_queue(q, sorted({t for st in STATES for t in q.ids(st)}))
    click.echo(
        jsonlib.dumps(s) if json_ else "\n".join([render(s), *usage.queue_lines(s["usage"])])
    )


@tasks.command(name="answer")
@click.argument("args", nargs=-1, metavar="[DIR] ID TEXT...")
@_errors
def tasks_answer(args):
    """Answer a parked task's question and release it from inbox/ to todo/."""
    q, rest = _split(args, "the task id")
    if len(rest) < 2:
        raise click.UsageError("give the task id and the answer")
    text = " ".join(rest[1:])
    if text == "-":
        text = sys.stdin.read()
    click.echo(f"{rest[0]} {q.moves.answer(rest[0], text)}")


@tasks.command(name="reap")
@queue_arg
@stale_option("Reap a claim whose heartbeat is older than this.")
@_errors
def tasks_reap(queue_dir, stale):
    """Return stale claims: builds to todo/ (attempts + 1; failed/ after 3), verifications
    to review/ (not an attempt), and end the agents they had started. Also releases
    backlog tasks whose dependencies are done (with dependants = landed: and landed on
    the base branch of the repository it runs in)."""
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client
    from orcr_tasks.guard import end_agent

    orcr = Orcr(Client(autostart=False))  # no server: no agent to end
    q = _open(queue_dir)
    q.moves.repo = repo_here()  # dependants = landed checks the repository this runs in
    try:
        for tid, src, dst in q.moves.reap(
            stale, end_agent(orcr, lambda m: click.echo(m, err=True))
        ):
            click.echo(f"{tid} {src} -> {dst}")
    finally:
        orcr.close()


@tasks.command(name="unlock")
@queue_arg
@click.option("--force", is_flag=True, help="Clear it even when the owner cannot be checked.")
@_errors
def tasks_unlock(queue_dir, force):
    """Clear a stale queue lock, after checking that its owner is gone.

    A move the owner was half way through is finished first.
    """
    click.echo(_open(queue_dir).unlock(force))


@tasks.command(name="settings")
@click.argument("args", nargs=-1, metavar="[DIR] [NAME=VALUE]...")
@click.option("--json", "json_", is_flag=True)
@_errors
def tasks_settings(args, json_):
    """Show the queue's settings, or set each NAME=VALUE (docs/tasks.md#dependants):

    \b
    dependants      merged (default) or landed: when a dependant leaves backlog/
    base            the branch builders start from ('' for the repository's HEAD)
    keep_checkouts  true keeps a built attempt's checkout (default: its branch only)
    land_check      the command tasks land runs on each tree it lands ('' unsets it)
    """
    from orcr_tasks import settings

    q, rest = _split(args, "NAME=VALUE")
    changes = {}
    for item in rest:
        name, eq, value = item.partition("=")
        if not eq:
            raise click.UsageError(f"{item!r} is not NAME=VALUE (e.g. dependants=landed)")
        changes[name] = settings.parse(name, value)
    conf = q.set_settings(changes) if changes else q.settings()
    if json_:
        click.echo(jsonlib.dumps(conf))
    else:
        for name, value in conf.items():
            shown = jsonlib.dumps(value) if not isinstance(value, str) else value
            click.echo(f"{name} = {shown}")


@tasks.command(name="work")
@queue_arg
@click.option("--role", type=click.Choice(["builder", "verifier"]), required=True)
@click.option(
    "--slots",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Tasks worked at once.",
)
@click.option(
    "--provider",
    "-p",
    "providers",
    multiple=True,
    metavar="P",
    help="Provider(s); a verifier uses one other than the builder's.",
)
@click.option(
    "--timeout",
    callback=_duration,
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="End an agent whose turn runs longer (a failed attempt for a builder).",
)
@click.option(
    "--heartbeat",
    callback=_duration,
    default="30s",
    show_default=True,
    help="Touch the heartbeat this often.",
)
@stale_option("Reap claims whose heartbeat is older.")
@click.option(
    "--cwd", type=click.Path(file_okay=False, exists=True), help="Agents' working directory."
)
@click.option("--drain", is_flag=True, help="Stop when there is nothing left to claim.")
@click.option(
    "--worktree",
    is_flag=True,
    help="Each agent in its own checkout of --cwd's repository (a verifier: of the revision).",
)
@click.option("--model", metavar="MODEL", help="The agents' model (a task's model: wins).")
@click.option("--arg", "extra", metavar="ARG", multiple=True, help="One more argument for the CLI.")
@click.option(
    "--sandbox/--no-sandbox",
    default=None,
    help="Every builder and verifier in a sandbox, as agent run --sandbox (default: orcr's "
    "[sandbox] default; docs/sandbox.md).",
)
@_errors
def tasks_work(
    queue_dir, role, slots, providers, timeout, heartbeat, stale, cwd, drain, worktree, model,
    extra, sandbox,
):  # fmt: skip
    """Claim tasks and work each with a fresh agent started through orcr.

    Builders claim todo/ -> doing/ and finish to review/ (a QUESTION parks the task in
    inbox/); verifiers claim review/ -> verifying/ and pass to done/ or reject to todo/.
    A claim guard started beside it ends this host's agents whose claims were reaped or
    taken over, even after the worker is killed (docs/tasks.md).
    """
    from orcr_core.sdk import Orcr
    from orcr_tasks.worker import Worker

    if heartbeat >= stale:
        raise click.BadParameter(f"--heartbeat must be shorter than --stale ({stale:g}s)")
    q = _open(queue_dir)
    w = Worker(
        q,
        role,
        slots=slots,
        providers=list(providers),
        timeout=timeout,
        heartbeat=heartbeat,
        stale=stale,
        cwd=cwd,
        drain=drain,
        sdk_factory=Orcr,
        worktree=worktree,
        model=model,
        args=list(extra),
        sandbox=sandbox,
        guard=True,
    )
    try:
        w.run()
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
