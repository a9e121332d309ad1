"""orcr core: admission, queue, store, server. Plugins import ``hookimpl`` from here.

``hookimpl`` is resolved lazily so that importing ``orcr_core`` (as the CLI's
client path does) does not import pluggy.
"""

from orcr_core import _deprecated

__all__ = ["hookimpl", "__version__"]
__version__ = "0.1.0"

_deprecated.install()  # the old import paths, for one release (orcr_core/_deprecated.py)


def __getattr__(name):
    if name == "hookimpl":
        from orcr_core.hookspecs import hookimpl

        return hookimpl
    raise AttributeError(f"module 'orcr_core' has no attribute {name!r}")
