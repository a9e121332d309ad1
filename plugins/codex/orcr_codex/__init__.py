"""orcr's bundled Codex CLI provider adapter."""

import orcr_core
from orcr_codex.provider import CodexProvider, summarize

__version__ = "0.1.0"
__all__ = ["CodexProvider", "summarize", "register_providers"]


@orcr_core.hookimpl
def register_providers(register):
    register(CodexProvider())
