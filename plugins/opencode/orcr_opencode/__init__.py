"""orcr's bundled OpenCode (``opencode-ai``) provider adapter."""

import orcr_core
from orcr_opencode.provider import OpenCodeProvider, summarize

__version__ = "0.1.0"
__all__ = ["OpenCodeProvider", "summarize", "register_providers"]


@orcr_core.hookimpl
def register_providers(register):
    register(OpenCodeProvider())
