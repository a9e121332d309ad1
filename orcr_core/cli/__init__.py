"""The ``orcr`` command line.

:func:`main` first offers the arguments to :mod:`orcr_core.cli.fast`, which
runs the hot verbs' common shapes (``agent run|ls|get|send|wait|read|kill``)
without importing click, the way git runs its builtins; anything else (``--help``,
an unknown option, a bad value, another noun) goes to the click group in
:mod:`orcr_core.cli.app`, so its help and its errors are click's, unchanged.
``cli`` (the click group) is loaded when asked for.
"""

from __future__ import annotations

import sys


def main() -> None:
    from orcr_core.cli import fast

    code = fast.run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from orcr_core.cli.app import main as click_main

    click_main()


def __getattr__(name: str):
    if name in ("cli", "LazyGroup", "LAZY", "handle_errors"):
        from orcr_core.cli import app

        return getattr(app, name)
    if name == "ExitCode":
        from orcr_core.cli.codes import ExitCode

        return ExitCode
    raise AttributeError(f"module 'orcr_core.cli' has no attribute {name!r}")


__all__ = ["cli", "main", "ExitCode"]
