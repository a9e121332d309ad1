"""The ``orcr`` click group: one module per noun, loaded when named.

Thin on purpose: the client path (``agent run|ls|get|kill``, ``server status``)
imports neither peewee, pluggy nor croniter; commands that need them import
them inside the command. The hot verbs' common shapes never get here
(:mod:`orcr_core.cli.fast`).
"""

from __future__ import annotations

import importlib

import click

from orcr_core import __version__
from orcr_core.cli.errors import ExitCode, handle_errors


class LazyGroup(click.Group):
    """Subcommands imported when used (click's lazy-loading recipe): ``orcr agent
    run`` never pays for the doctor, plugin or config modules.

    Plugin commands (the ``register_commands`` hook) are loaded only when a name
    is not a built-in one or when the commands are listed (``orcr --help``), so
    the client path never imports pluggy.
    """

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy
        self.plugin_commands: dict[str, str] | None = None  # {name: plugin} once loaded

    def load_plugin_commands(self) -> dict[str, str]:
        """Ask every plugin for its commands, once."""
        if self.plugin_commands is None:
            from orcr_core.cli.errors import OrcrCliError
            from orcr_core.pm.plugins import PluginError, get_plugin_manager, register_commands

            self.plugin_commands = {}
            try:
                self.plugin_commands = register_commands(get_plugin_manager(), self, set(self.lazy))
            except PluginError as exc:
                raise OrcrCliError(str(exc)) from None
            except ImportError as exc:  # an installed plugin whose code is gone or broken
                raise OrcrCliError(
                    f"a plugin failed to load: {exc}; uninstall it or block it with "
                    "ORCR_BLOCK_PLUGINS=<name>"
                ) from None
        return self.plugin_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load_plugin_commands()
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            module, _, attr = self.lazy[name].rpartition(".")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        elif name not in self.commands:
            self.load_plugin_commands()
        return super().get_command(ctx, name)


LAZY = {
    "agent": "orcr_core.cli.agent.agent",
    "server": "orcr_core.cli.server_cmd.server",
    "loop": "orcr_core.cli.loop.loop",
    "config": "orcr_core.cli.config_cmd.config",
    "internal": "orcr_core.cli.internal.internal",
    "plugins": "orcr_core.cli.misc.plugins_list",
    "install": "orcr_core.cli.misc.install",
    "uninstall": "orcr_core.cli.misc.uninstall",
    "provider": "orcr_core.cli.misc.provider",
    "doctor": "orcr_core.cli.doctor.doctor",
    "top": "orcr_core.cli.top.top",
    "service": "orcr_core.cli.service_cmd.service",
    "notify": "orcr_core.cli.notify_cmd.notify",
    "worktree": "orcr_core.cli.worktree.worktree",
    "usage": "orcr_core.cli.usage_cmd.usage",
    "events": "orcr_core.cli.events_cmd.events",
}


@click.group(cls=LazyGroup, lazy=LAZY, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orcr")
def cli():
    """orcr: run many coding-agent TUIs on one machine without taking it down.

    Every agent run is admitted through one durable FIFO queue under a global cap
    and per-provider caps; a background server starts each agent in a multiplexer
    pane (herdr, or tmux) and follows its transcript.
    """


def main() -> None:
    with handle_errors():
        cli.main(prog_name="orcr", standalone_mode=True)


__all__ = ["cli", "main", "ExitCode", "LazyGroup", "LAZY"]
