"""``orcr plugins``, ``orcr install``, ``orcr uninstall``, ``orcr provider parse``."""

from __future__ import annotations

import json as jsonlib
import re
import sys
from runpy import run_module

import click

from orcr_core.cli.errors import ExitCode, OrcrCliError


@click.command(name="plugins")
@click.option("--json", "json_", is_flag=True, help="One JSON array of plugin rows.")
def plugins_list(json_):
    """List loaded plugins with their versions, hooks, drivers and providers."""
    from orcr_core.pm.plugins import PluginError, build_registry, describe, get_plugin_manager

    try:
        pm = get_plugin_manager()
        reg = build_registry(pm)
    except PluginError as exc:
        raise OrcrCliError(str(exc)) from None
    rows = describe(pm)
    for row in rows:
        row["drivers"] = sorted(
            n for (k, n), p in reg.owners.items() if k == "driver" and p == row["name"]
        )
        row["providers"] = sorted(
            n for (k, n), p in reg.owners.items() if k == "provider" and p == row["name"]
        )
        # the release range each adapter was checked against ("" for any)
        row["supported_versions"] = {
            n: getattr(reg.providers[n], "supported_versions", "") or "" for n in row["providers"]
        }
    if json_:
        click.echo(jsonlib.dumps(rows))
        return
    for row in rows:
        version = row["version"] or "-"
        origin = f" ({row['distribution']})" if row["distribution"] else ""
        click.echo(f"{row['name']} {version}{origin}")
        ranges = row["supported_versions"]
        row["providers"] = [f"{n} ({ranges[n]})" if ranges[n] else n for n in row["providers"]]
        for key in ("drivers", "providers", "hooks"):
            if row[key]:
                click.echo(f"  {key}: {', '.join(row[key])}")


def _pip(args: list[str]) -> None:
    sys.argv = ["pip", *args]
    try:
        run_module("pip", run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise OrcrCliError(f"pip {' '.join(args)} failed (exit {exc.code})") from None


@click.command(name="install")
@click.argument("packages", nargs=-1, required=True)
@click.option("-U", "--upgrade", is_flag=True)
@click.option("-e", "--editable", help="Install an editable plugin from a local path.")
def install(packages, upgrade, editable):
    """Install plugin PACKAGES into orcr's own environment (pip)."""
    args = ["install", *(["--upgrade"] if upgrade else []), *packages]
    if editable:
        args += ["--editable", editable]
    _pip(args)


def _dist_name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503): ``ORCR==0.1`` -> ``orcr``."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


@click.command(name="uninstall")
@click.argument("packages", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask (needed without a terminal).")
def uninstall(packages, yes):
    """Uninstall plugin PACKAGES from orcr's environment.

    Never orcr itself: that would remove the command you are running.
    """
    if any(_dist_name(p) == "orcr" for p in packages):
        raise OrcrCliError(
            "orcr uninstall removes plugins, not orcr itself; to remove orcr run "
            f"{sys.executable} -m pip uninstall orcr",
            ExitCode.USAGE,
        )
    if not yes and not sys.stdin.isatty():
        raise OrcrCliError(
            "pip would ask before uninstalling and there is no terminal to ask on; "
            "pass --yes to uninstall without asking",
            ExitCode.USAGE,
        )
    _pip(["uninstall", *packages, *(["-y"] if yes else [])])


@click.group(name="provider")
def provider():
    """Provider adapters."""


@provider.command(name="parse")
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "json_", is_flag=True)
def provider_parse(name, file, json_):
    """Print what provider NAME's adapter reads from transcript FILE.

    The tool to reach for when an adapter misreads your transcripts.
    """
    from orcr_core.pm.plugins import build_registry, get_plugin_manager

    reg = build_registry(get_plugin_manager())
    p = reg.providers.get(name)
    if p is None:
        raise OrcrCliError(
            f"unknown provider {name!r}; installed: {', '.join(sorted(reg.providers))}"
        )
    if not getattr(p, "has_transcript", False):
        raise OrcrCliError(f"provider {name!r} has no transcript to parse")
    summarize = getattr(p, "summarize", None)
    if summarize is not None:  # reads the file as complete: no live guesses
        out = summarize(file)
    else:
        state = p.open_reader(file).poll()
        out = {
            "provider": name,
            "version": state.version,
            "state": state.state,
            "turns": [
                {"status": t.status, "final_text": t.final_text, "error": t.error}
                for t in state.turns
            ],
        }
    if out["state"] == "unknown" and not out["turns"] and not out.get("version"):
        raise OrcrCliError(
            f"{file} does not look like a transcript of provider {name!r}: its adapter "
            "found no session and no turn in it"
        )
    if json_:
        click.echo(jsonlib.dumps(out))
        return
    click.echo(f"{name} {out['version'] or '?'}: {out['state']}, {len(out['turns'])} turn(s)")
    for i, t in enumerate(out["turns"], 1):
        text = (t["final_text"] or t.get("error") or "").replace("\n", " ")
        click.echo(f"  {i}. {t['status']}" + (f": {text[:100]}" if text else ""))
