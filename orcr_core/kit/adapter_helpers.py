"""Provider-agnostic adapter helpers: part of the provider kit (docs/plugins/kit.md).

:class:`JsonlAdapter` is the base class of the JSONL-transcript providers (claude,
codex, gemini, pi); nothing here knows about one provider.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orcr_core.contracts import ProviderError, TurnState
from orcr_core.kit.jsonl_tail import JsonlTurnReader
from orcr_core.kit.versions import check_version


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


#: JSON whitespace around a prompt a CLI kept as typed (``\\n`` escapes, spaces)
_PAD = r"(?:\s|\\[nrt])*"


def prompt_search(prompt: str) -> Callable[[str], bool]:
    """A test for JSONL text that holds ``prompt`` as a whole JSON string value, space
    around it aside: ``hello 1`` is not found in ``"hello 10"`` (issue 33 item 7: a
    substring match gave one agent another's thread)."""
    needle = json.dumps(prompt.strip(), ensure_ascii=False)[1:-1]
    pattern = re.compile(r'(?<!\\)"' + _PAD + re.escape(needle) + _PAD + '"')
    return lambda text: bool(needle) and pattern.search(text) is not None


def summarize_file(provider: str, path: str, poll: Callable[[str], TurnState]) -> dict[str, Any]:
    """The ``orcr provider parse`` shape for one whole transcript file."""
    if not os.path.isfile(path):
        raise ProviderError(f"no transcript file at {path}", code="transcript_unreadable")
    return summary(provider, poll(path))


def summary(provider: str, state: TurnState) -> dict[str, Any]:
    """A reader's ``state`` in ``orcr provider parse`` shape."""
    return {
        "provider": provider,
        "version": state.version,
        "state": state.state,
        "turns": [
            {"status": t.status, "final_text": t.final_text, "error": t.error} for t in state.turns
        ],
    }


class JsonlAdapter:
    """The half of a provider adapter that JSONL transcript adapters share: the
    incremental reader, version pinning and the whole-file summary. A subclass
    sets ``name`` and ``supported_versions`` and implements ``turns(settle,
    blocked_after)``, returning a fresh record parser (see :mod:`orcr_core.kit.jsonl_tail`).
    """

    name: str
    supported_versions: str
    has_transcript = True

    def turns(self, settle: float, blocked_after: float | None):
        raise NotImplementedError

    def open_reader(
        self,
        path: str,
        *,
        settle: float = 3.0,
        blocked_after: float | None = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> JsonlTurnReader:
        """An incremental reader. ``settle``: quiet seconds that confirm a turn end the
        format does not mark; ``blocked_after``: quiet seconds before the blocked guess
        (None turns it off). ``clock``/``wall``: the monotonic and wall clocks (the wall
        clock only ages the file's mtime at the first read)."""
        return JsonlTurnReader(
            path, lambda: self.turns(settle, blocked_after), clock=clock, wall=wall
        )

    def check_version(self, version: str | None, options: dict[str, Any]) -> str | None:
        return check_version(self.name, self.supported_versions, version, options)

    def summarize(self, path: str) -> dict[str, Any]:
        """One whole transcript as ``{"provider", "version", "state", "turns"}`` (taken as
        complete: no settle wait, no blocked guess), for ``orcr provider parse``."""
        return summarize_file(
            self.name, path, lambda p: self.open_reader(p, settle=0.0, blocked_after=None).poll()
        )
