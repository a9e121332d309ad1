"""Exit codes and error printing for the CLI."""

from __future__ import annotations

import contextlib
import sys

import click

from orcr_core.cli.codes import CODE_MAP, CliFailure, ExitCode, error_exit  # noqa: F401


class OrcrCliError(click.ClickException):
    def __init__(self, message: str, code: int = ExitCode.ERROR):
        super().__init__(message)
        self.exit_code = int(code)


@contextlib.contextmanager
def handle_errors():
    try:
        yield
    except Exception as exc:
        code = error_exit(exc)
        if code is None:
            raise
        sys.exit(code)


@contextlib.contextmanager
def as_click():
    """A click-free verb's :class:`CliFailure` as click's exception (same line, same code)."""
    try:
        yield
    except CliFailure as exc:
        raise OrcrCliError(exc.message, exc.code) from None
