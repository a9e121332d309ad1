"""orcr's provider plugin for the pi coding agent, shipped as its own distribution
(``orcr-pi``, ``plugins/pi/pyproject.toml``): ``pip install ./plugins/pi`` or
``orcr install ./plugins/pi``."""

import orcr_core
from orcr_pi.provider import PiProvider, summarize

__version__ = "0.1.0"
__all__ = ["PiProvider", "summarize", "register_providers"]


@orcr_core.hookimpl
def register_providers(register):
    register(PiProvider())
