"""The ``command`` provider: any argv as an agent."""

from __future__ import annotations

from typing import Any

from orcr_core.contracts import LaunchSpec, ProviderError, SessionPointer


class CommandProvider:
    """Run any argv (a TUI, a REPL, a script) as an agent.

    The argv comes from ``spec.options["argv"]``: ``[providers.command] argv``
    in the config, or the argv given at ``orcr agent run`` time (the core puts
    it there too). It is executed directly, never through a shell.

    There is no transcript: ``launch_session`` and ``locate_transcript`` return
    None and ``open_reader`` refuses. The core follows such an agent's turns
    through the multiplexer's agent state for its pane (working / idle /
    blocked), and its end through the process exiting. Any version passes.
    """

    name = "command"
    has_transcript = False
    needs_argv = True  # admission refuses a run with no argv (none given, none configured)
    supported_versions = ""

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        argv = spec.options.get("argv")
        if not argv:
            raise ProviderError(
                "the command provider needs an argv: set [providers.command] argv = "
                '["program", "arg"] in the config, or give the command at run time',
                code="missing_argv",
            )
        if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
            raise ProviderError(
                f"[providers.command] argv = {argv!r} is not a list of strings",
                code="bad_argv",
            )
        return list(argv)

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        return None

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        return None

    def open_reader(self, path: str):
        raise ProviderError(
            "the command provider has no transcript; its turns follow the multiplexer",
            code="no_transcript",
        )

    def check_version(self, version: str | None, options: dict[str, Any]) -> str | None:
        return None
