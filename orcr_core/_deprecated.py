"""Old import paths that keep working for one release, with a warning (pytest's
``_pytest/deprecated.py`` way: every deprecation is named here, in one place).

The root of ``orcr_core`` holds only the public contracts (docs/internals.md, "Where
things live"); the provider kit moved to :mod:`orcr_core.kit` and the internals into
their sub-packages. A plugin written against an old path (``orcr-pi`` 0.1, a
third party's) still imports: ``import orcr_core.adapter_helpers`` or
``from orcr_core import events`` gives the moved module itself (the same object, so a
test's monkeypatch through the old name still reaches the code) and warns once,
with an :class:`OrcrDeprecationWarning` pointing at the importing line.

The old names are not files at the root: one import finder, installed by
``orcr_core/__init__.py``, serves the table :data:`MOVED`. Removing a row (in
:data:`REMOVED_IN`) removes the old path.
"""

from __future__ import annotations

import sys

#: the release that drops the old paths
REMOVED_IN = "0.3"

#: old module -> where it lives now
MOVED: dict[str, str] = {
    # the provider kit (docs/plugins/kit.md)
    "orcr_core.adapter_helpers": "orcr_core.kit.adapter_helpers",
    "orcr_core.jsonl_tail": "orcr_core.kit.jsonl_tail",
    "orcr_core.screens": "orcr_core.kit.screens",
    "orcr_core.versions": "orcr_core.kit.versions",
    "orcr_core.argv": "orcr_core.kit.argv",
    "orcr_core.testing": "orcr_core.kit.testing",
    # internals, in their sub-packages (docs/internals.md, "Code layout")
    "orcr_core.config_edit": "orcr_core.config.edit",
    "orcr_core.events": "orcr_core.store.events",
    "orcr_core.faults": "orcr_core.store.faults",
    "orcr_core.lockfile": "orcr_core.server.lockfile",
    "orcr_core.plugins": "orcr_core.pm.plugins",
    "orcr_core.provider_guard": "orcr_core.pm.provider_guard",
    "orcr_core.drivers": "orcr_core.pm.drivers",
    # the SDK, one package
    "orcr_core.client": "orcr_core.sdk.client",
    "orcr_core.watch": "orcr_core.sdk.watch",
}


class OrcrDeprecationWarning(DeprecationWarning):
    """A deprecated orcr API is used; it is removed in :data:`REMOVED_IN`."""


def moved_module(old: str, new: str) -> OrcrDeprecationWarning:
    return OrcrDeprecationWarning(
        f"{old} moved to {new}; import it from there (the old path is removed in orcr {REMOVED_IN})"
    )


class _MovedFinder:
    """Finds and loads the old names of :data:`MOVED` as the moved modules."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        from importlib.machinery import ModuleSpec  # here: importing orcr_core stays light

        return ModuleSpec(fullname, self)

    def create_module(self, spec):
        import importlib
        import warnings

        new = MOVED[spec.name]
        # stacklevel 2: the frame importing the old name (importlib's own frames are skipped)
        warnings.warn(moved_module(spec.name, new), stacklevel=2)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # put back in exec_module (the import sets ours)
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Serve the old paths (idempotent)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
