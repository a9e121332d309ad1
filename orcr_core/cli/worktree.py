"""``orcr worktree``: the checkouts orcr made for agents (``agent run --worktree``)."""

from __future__ import annotations

import json as jsonlib

import click

from orcr_core.cli.output import echo_table, sdk


@click.group()
def worktree():
    """List and remove the checkouts orcr made for agents."""


@worktree.command(name="ls")
@click.option("--all", "all_", is_flag=True, help="Removed checkouts too.")
@click.option("--json", "json_", is_flag=True, help="Print JSON.")
def worktree_ls(all_, json_):
    """Every checkout orcr made: its agent, state, branch and what it holds.

    A checkout is kept when its agent ended with changes or commits on no other
    branch; 'orcr worktree rm' removes a kept one.
    """
    with sdk() as orcr:
        rows = orcr.worktrees(all=all_)
    if json_:
        click.echo(jsonlib.dumps(rows))
        return
    echo_table(
        ("AGENT", "STATE", "BRANCH", "HOLDS", "CHECKOUT"),
        [
            (
                w["agent"],
                w["state"],
                w["branch"] or "-",
                w.get("holds") or w.get("reason") or "-",
                w["path"],
            )
            for w in rows
        ],
    )


@worktree.command(name="rm")
@click.argument("target")
@click.option("--force", is_flag=True, help="Discard its uncommitted files too.")
@click.option("--json", "json_", is_flag=True, help="Print JSON.")
def worktree_rm(target, force, json_):
    """Remove the kept checkout of an ended agent (TARGET: its path, uuid or checkout).

    Refused while it holds changes or commits that are on no other branch, unless
    --force; even then a branch with such commits is kept, so no commit is lost.
    """
    with sdk() as orcr:
        res = orcr.remove_worktree(target, force=force)
    if json_:
        click.echo(jsonlib.dumps(res))
    else:
        click.echo(
            f"{res['worktree']} removed"
            + ("" if not res["branch_kept"] else f" ({res['reason'].split('; ', 1)[1]})")
        )


@worktree.command(name="prune")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; change nothing.")
@click.option("--json", "json_", is_flag=True, help="Print JSON.")
def worktree_prune(dry_run, json_):
    """Remove every kept checkout whose agent ended and whose work is on its branch.

    The branch stays while it holds commits on no other branch (its work is
    recorded there) and goes when they are merged into another. A checkout with
    uncommitted or untracked files is left: 'orcr worktree rm --force' discards them.
    """
    with sdk() as orcr:
        res = orcr.prune_worktrees(dry_run=dry_run)
    if json_:
        click.echo(jsonlib.dumps(res))
        return
    verb = "would remove" if dry_run else "removed"
    for w in res["pruned"]:
        if not w["branch"]:
            fate = "no branch"
        elif w["branch_kept"]:
            fate = f"branch {w['branch']} stays ({w['reason'].split('keeps ', 1)[-1]})"
        else:
            fate = f"branch {w['branch']} goes (nothing on it is only there)"
        click.echo(f"{verb} {w['worktree']} ({w['path']}): {fate}")
    for w in res["left"]:
        click.echo(f"left {w['worktree']} ({w['path']}): {w['reason']}")
    if not res["pruned"] and not res["left"]:
        click.echo("no kept checkout to prune")
