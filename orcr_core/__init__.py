"""orcr core: admission, queue, store, server. Plugins import ``hookimpl`` from here."""

from orcr_core.hookspecs import hookimpl

__all__ = ["hookimpl", "__version__"]
__version__ = "0.1.0"
