"""orcr's bundled Gemini CLI provider adapter."""

import orcr_core
from orcr_gemini.provider import GeminiProvider, summarize

__version__ = "0.1.0"
__all__ = ["GeminiProvider", "summarize", "register_providers"]


@orcr_core.hookimpl
def register_providers(register):
    register(GeminiProvider())
