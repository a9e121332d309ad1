"""Provider-agnostic adapter helpers, reused by ``orcr_codex``.

Like :mod:`orcr_core.jsonl_tail`, these belong in ``orcr_core`` once its owner
takes them; nothing here knows about Claude.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orcr_core.contracts import ProviderError, TurnState


def str_list(value: Any, key: str) -> list[str]:
    """A config value that must be a list of strings (a lone string is one item).

    Never split on spaces: argv elements are passed to exec as they are.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ProviderError(
        f'{key} = {value!r} is not allowed; use a list of strings, e.g. ["--flag", "value"]',
        code="bad_provider_option",
    )


def base_argv(
    provider: str, options: dict[str, Any], default: str, middle: list[str], model_flag: str
) -> list[str]:
    """``argv`` (default ``[default]``) + ``middle`` + ``model_flag MODEL`` + ``extra_args``."""
    argv = str_list(options.get("argv", [default]), f"providers.{provider}.argv")
    if not argv or not argv[0]:
        raise ProviderError(
            f'providers.{provider}.argv is empty; give the command, e.g. ["{default}"]',
            code="bad_provider_option",
        )
    argv += middle
    model = options.get("model")
    if model:
        if not isinstance(model, str):
            raise ProviderError(
                f"providers.{provider}.model = {model!r} is not allowed; use a string",
                code="bad_provider_option",
            )
        argv += [model_flag, model]
    argv += str_list(options.get("extra_args", []), f"providers.{provider}.extra_args")
    return argv


def config_root(options: dict[str, Any], env_var: str, default: str) -> Path:
    """The provider's home: ``options["home"]``, else ``$env_var``, else ``default`` (``~`` expanded)."""
    root = options.get("home") or os.environ.get(env_var) or default
    return Path(os.path.expanduser(str(root)))


def summarize_file(provider: str, path: str, poll: Callable[[str], TurnState]) -> dict[str, Any]:
    """The ``orcr provider parse`` shape for one whole transcript file."""
    if not os.path.isfile(path):
        raise ProviderError(f"no transcript file at {path}", code="transcript_unreadable")
    state = poll(path)
    return {
        "provider": provider,
        "version": state.version,
        "state": state.state,
        "turns": [{"status": t.status, "final_text": t.final_text} for t in state.turns],
    }
