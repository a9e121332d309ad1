"""``orcr config``: get, set, unset, path."""

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
    """Print KEY's effective value (dotted, such as concurrency.max), or everything as JSON."""
    from orcr_core.config import ConfigError, check_key, load

    try:
        if key is not None:
            check_key(key, tables=True)
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


def _refuse_mux_switch(key: str, new) -> None:
    """A key that moves orcr to another multiplexer server or session is refused
    while agents are live: the server would lose sight of them and their TUIs
    would run on untracked, outside the caps (docs/decisions.md)."""
    from orcr_core import dirs
    from orcr_core.config import load
    from orcr_core.config.edit import MUX_KEYS
    from orcr_core.store.db import count_live

    if key not in MUX_KEYS:
        return
    old = load().get(key)
    if key in ("tmux.socket", "herdr.session"):  # empty: this instance's own name
        new, old = new or dirs.mux_name(), old or dirs.mux_name()
    if new == old:
        return
    n = count_live(dirs.store_path())
    if n:
        raise OrcrCliError(
            f"{key} is not changed: {n} agent{'s are' if n != 1 else ' is'} live on the "
            f"multiplexer orcr drives now (starting, working, idle or lost), and changing "
            f"{key} would orphan {'them' if n != 1 else 'it'}. Drain them first (orcr agent "
            f"kill '**', or wait until they end: orcr agent ls), then set it again. "
            "Nothing was written."
        )


def _refuse_silent_off(key: str, value) -> None:
    """A webhook URL the sink cannot post to would switch notifications off with no
    word but a line in ``notify ls``: README's literal ``URL``, ``ftp://x``."""
    if key != "notify.webhook.url":
        return
    if not (isinstance(value, str) and value.startswith(("http://", "https://"))):
        from orcr_core.config import ConfigError

        raise ConfigError(
            f"{key} = {value!r}: the webhook posts to an http:// or https:// URL only "
            "(such as https://ntfy.sh/my-topic); this value would leave it off. Nothing was written."
        )


@config.command(name="set", context_settings={"ignore_unknown_options": True})
@click.option(
    "--force",
    is_flag=True,
    help="Accept concurrency.NAME for a provider that is not installed (yet).",
)
@click.argument("key")
@click.argument("value")
def config_set(key, value, force):
    """Set KEY to VALUE, keeping the file's comments; the server reloads it.

    VALUE is read as a TOML literal when it is one (3, true, ["a", "b"]), else as
    a string; a negative number needs no --. A bad key or value is refused with
    what is allowed, and nothing is written. concurrency.NAME (a provider's cap)
    needs an installed provider NAME, or --force for a third-party provider you
    will install later; tmux.socket needs a directory that exists.
    driver.name, tmux.socket, herdr.session and herdr.socket are refused while
    agents are live. A key part with a / in it is quoted as TOML does:
    orcr config set 'budget."nightly/review".tokens' 500.
    """
    from orcr_core.config import ConfigError
    from orcr_core.config.edit import coerce, set_value

    try:
        _refuse_mux_switch(key, coerce(value))
        _refuse_silent_off(key, coerce(value))
        stored = set_value(key, value, force=force)
    except ConfigError as exc:
        raise OrcrCliError(str(exc)) from None
    click.echo(f"{key} = {jsonlib.dumps(stored)}")
    _reload()


@config.command(name="unset")
@click.argument("key")
def config_unset(key):
    """Remove KEY from the config file, so its default applies again.

    A table left empty goes too. A key the file does not set is left alone
    (said, exit 0). The server reloads
    the file. The keys that switch the multiplexer are refused while agents are live.
    """
    from orcr_core.config import DEFAULTS, ConfigError
    from orcr_core.config.edit import unset_value

    try:
        section, _, name = key.partition(".")
        _refuse_mux_switch(key, DEFAULTS.get(section, {}).get(name))
        old = unset_value(key)
    except ConfigError as exc:
        raise OrcrCliError(str(exc)) from None
    if old is None:
        click.echo(f"{key} is not set in the file; nothing to do")
        return
    click.echo(f"{key} unset (was {jsonlib.dumps(old)})")
    _reload()


def _reload() -> None:
    from orcr_core.sdk.client import Client, ServerError

    try:
        with Client(autostart=False) as c:
            c.call("config.reload")
    except ServerError:
        pass  # no server running: it reads the file when it starts


@config.command(name="reload")
def config_reload():
    """Apply the config file to the running server now, and print what changed.

    The server also applies an edit by itself within 2 s. A file that is not valid
    changes nothing (the last good config stays in force): exit 1 with the key and
    what it allows, or the line TOML could not read. With no server running, the file
    is only checked (it applies when the server starts).
    """
    from orcr_core.config import ConfigError, load
    from orcr_core.sdk.client import Client, ServerError

    try:
        with Client(autostart=False) as c:
            changed = c.call("config.reload").get("changed") or {}
    except ServerError as exc:
        if exc.code == "invalid_config":
            raise OrcrCliError(
                f"{exc.message}; the server keeps its last good config "
                "(fix the file, then orcr config reload)"
            ) from None
        if exc.code not in ("server_not_running", "socket_missing"):
            raise OrcrCliError(f"{exc.message} [{exc.code}]") from None
        try:
            load()
        except ConfigError as err:
            raise OrcrCliError(str(err)) from None
        click.echo("no server runs; the file is valid and applies when the server starts")
        return
    if not changed:
        click.echo("config reloaded: nothing changed")
    for key, (old, new) in changed.items():
        click.echo(f"{key}: {_shown(old)} -> {_shown(new)}")


def _shown(value) -> str:
    return "(unset)" if value is None else jsonlib.dumps(value)
