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
