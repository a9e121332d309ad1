"""orcr's bundled tmux plugin: the fallback multiplexer driver (tmux >= 3.2)."""

import orcr_core
from orcr_tmux.driver import TmuxDriver

__all__ = ["TmuxDriver"]


@orcr_core.hookimpl
def register_drivers(register):
    register(TmuxDriver)
