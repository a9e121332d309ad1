"""``orcr config``: get, set, path."""

from __future__ import annotations

import json as jsonlib

import click

from orcr_core.cli.errors import OrcrCliError


@click.group()
def config():
    """Read and edit the TOML configuration."""


@config.command(name="path")
def config_path():
    """Print the config file's path."""
    from orcr_core import dirs

    click.echo(dirs.config_path())


@config.command(name="get")
@click.argument("key", required=False)
def config_get(key):
    """Print KEY's effective value (dotted, e.g. concurrency.max), or everything as JSON."""
    from orcr_core.config import ConfigError, load

    try:
        cfg = load()
    except ConfigError as exc:
        raise OrcrCliError(str(exc)) from None
    if key is None:
        click.echo(jsonlib.dumps(cfg.data))
        return
    value = cfg.get(key)
    if value is None:
        raise OrcrCliError(f"{key} is not set (orcr config get lists every key)")
    click.echo(jsonlib.dumps(value) if isinstance(value, dict | list | bool) else value)


@config.command(name="set")
@click.argument("key")
@click.argument("value")
def config_set(key, value):
    """Set KEY to VALUE, keeping the file's comments; the server reloads it.

    VALUE is read as a TOML literal when it is one (3, true, ["a", "b"]), else as
    a string. A bad key or value is refused and nothing is written.
    """
    from orcr_core.client import Client, ServerError
    from orcr_core.config import ConfigError, set_value

    try:
        stored = set_value(key, value)
    except ConfigError as exc:
        raise OrcrCliError(str(exc)) from None
    click.echo(f"{key} = {jsonlib.dumps(stored)}")
    try:
        with Client(autostart=False) as c:
            c.call("config.reload")
    except ServerError:
        pass  # no server running: it reads the file when it starts
