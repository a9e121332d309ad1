"""``orcr tasks land``: the command (the loop is :mod:`orcr_tasks.land.lander`)."""

from __future__ import annotations

import click

from orcr_tasks.cli import _duration, _errors, _open, queue_arg, stale_option


@click.command(name="land")
@queue_arg
@click.option(
    "--repo",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="The git repository to land in (its builders' branches are there).",
)
@click.option(
    "--onto", metavar="BRANCH", help="The branch to land on [default: --repo's current branch]."
)
@click.option(
    "--check",
    metavar="CMD",
    help="Shell command run on each tree before it lands (default: the land_check setting).",
)
@click.option(
    "--strategy",
    type=click.Choice(["rebase", "merge"]),
    default="rebase",
    show_default=True,
    help="How a task's verified revision is brought onto the branch's tip.",
)
@click.option("--watch", is_flag=True, help="Keep landing as tasks reach done/.")
@click.option("--max", "max_", type=click.IntRange(min=1), help="Stop after N tasks landed.")
@click.option("--keep-branches", is_flag=True, help="Keep a landed task's builder branch.")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="K",
    help="Land up to K tasks with one check, bisecting on red (docs/tasks.md#batches).",
)
@click.option(
    "--heartbeat",
    callback=_duration,
    default="30s",
    show_default=True,
    help="Touch the claim's heartbeat this often while a check runs.",
)
@stale_option("Take back other landers' claims whose heartbeat is older.")
@_errors
def tasks_land(
    queue_dir, repo, onto, check, strategy, watch, max_, keep_branches, batch, heartbeat, stale
):
    """Land done/ tasks on BRANCH, oldest first: a merge queue (docs/tasks.md#landing-tasks-land).

    For each task, in a scratch checkout of BRANCH's tip: bring in exactly the
    revision its verifiers passed (rebase or merge), run the check on that tree,
    and move BRANCH to the tested commit only from the tip that was tested (it moved
    meanwhile: try again on the new tip). Landed: to landed/ with landed_commit. A
    conflict or a red check: back to todo/ with a "## Land failed N" section, an
    attempt (the third sends it to failed/). A task whose passes do not cover its
    revision, or whose branch moved after its pass, is refused back to review/.

    Git only: jj is not supported (it cannot be tested here; a colocated jj
    repository lands through git).
    """
    from orcr_core.kit.activities import Activity
    from orcr_tasks.land.git import GitError
    from orcr_tasks.land.lander import Lander

    q = _open(queue_dir)
    try:
        lander = Lander(
            q, repo, onto=onto, check=check, strategy=strategy, keep_branches=keep_branches,
            heartbeat=heartbeat, stale=stale, say=lambda m: click.echo(f"orcr tasks [lander] {m}"),
        )  # fmt: skip
        # orcr top shows the lander while it runs (its queue, task and step)
        with Activity("lander", q.name, queue=q.label, onto=lander.onto, repo=lander.repo) as a:
            lander.activity = a
            counts = lander.run(watch=watch, max_landed=max_, batch=batch)
    except GitError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
        return
    outcomes = ("landed", "failed", "refused", "returned")
    click.echo(", ".join(f"{k} {counts.get(k, 0)}" for k in outcomes) + f", checks {lander.checks}")
