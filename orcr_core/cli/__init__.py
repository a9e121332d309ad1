"""The ``orcr`` command line: one click group, one module per noun.

Thin on purpose: the client path (``agent run|ls|get|kill``, ``server status``)
imports neither peewee, pluggy nor croniter; commands that need them import
them inside the command.
"""

from __future__ import annotations

import sys

import click

from orcr_core import __version__
from orcr_core.cli.errors import ExitCode, handle_errors


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orcr")
def cli():
    """orcr: run many coding-agent TUIs on one machine without taking it down.

    Every agent run is admitted through one durable FIFO queue under a global cap
    and per-provider caps; a background server starts each agent in a multiplexer
    pane (herdr, or tmux) and follows its transcript.
    """


def _register() -> None:
    from orcr_core.cli import agent, config_cmd, internal, misc, server_cmd

    cli.add_command(agent.agent)
    cli.add_command(internal.internal)
    cli.add_command(server_cmd.server)
    cli.add_command(config_cmd.config)
    for cmd in misc.COMMANDS:
        cli.add_command(cmd)


_register()


def main() -> None:
    with handle_errors():
        cli.main(prog_name="orcr", standalone_mode=True)


__all__ = ["cli", "main", "ExitCode", "sys"]
