"""orcr's bundled Claude Code provider adapter."""

import orcr_core
from orcr_claude.provider import ClaudeProvider, summarize

__version__ = "0.1.0"
__all__ = ["ClaudeProvider", "summarize", "register_providers"]


@orcr_core.hookimpl
def register_providers(register):
    register(ClaudeProvider())
