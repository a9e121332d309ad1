"""What an SDK call sends: its params built and checked in the caller's process.

The server checks everything again; checking here first gives a clear error
before anything is sent (a prompt that is not UTF-8, or too large) and reads
targets and paths as the caller sees them (``ORCR_PATH``, the working directory).
"""

from __future__ import annotations

import os

from orcr_core import paths
from orcr_core.protocol import prompt_not_utf8, prompt_too_large
from orcr_core.sdk.client import ServerError, scope_from_env

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start
if TYPE_CHECKING:
    from typing import Any


def scoped(target: str, scope: str | None = None) -> str:
    """The target an SDK call sends: ``target`` read from inside the caller's scope
    (``ORCR_PATH``), as ``run`` places a path there (:func:`orcr_core.paths.in_scope`):
    ``kid`` is ``<scope>/kid``; ``/top/kid`` names a path from the top; uuids as given."""
    return paths.in_scope(target, scope if scope is not None else scope_from_env())


def scope_hint(message: str, target: str, full: str) -> str:
    return (
        f"{message}; {target!r} was read inside ORCR_PATH as {full!r} "
        f"(name a path from the top with a leading /, e.g. /{target})"
    )


def check_prompt(prompt: str | None) -> None:
    """Refuse a prompt that is not valid UTF-8 (``invalid_prompt``) or oversized
    (``prompt_too_large``) before sending it (the server checks both again)."""
    if not isinstance(prompt, str):
        return
    why = prompt_not_utf8(prompt)
    if why:
        raise ServerError("invalid_prompt", why)
    why = prompt_too_large(prompt)
    if why:
        raise ServerError("prompt_too_large", why)


def run_params(
    prompt=None,
    *,
    provider=None,
    path=None,
    name=None,
    cwd=None,
    timeout=None,
    argv=None,
    scope=None,
    worktree=False,
    branch=None,
    base=None,
    model=None,
    args=None,
    rm=None,
    gc_after=None,
    sandbox=None,
    allow_net=None,
    limits=None,
) -> dict:
    """The ``agent.run`` params of :meth:`orcr_core.sdk.Orcr.run`'s keywords: the
    prompt checked, ``cwd`` made absolute, the caller's scope applied."""
    check_prompt(prompt)
    params: dict[str, Any] = {"cwd": os.path.abspath(cwd or os.getcwd())}
    if worktree:
        params["worktree"] = True
    if provider is not None:
        params["provider"] = provider
    for key, value in (
        ("prompt", prompt),
        ("path", path),
        ("name", name),
        ("timeout", timeout),
        ("argv", argv),
        ("scope", scope if scope is not None else scope_from_env()),
        ("branch", branch),
        ("base", base),
        ("model", model),
        ("args", list(args) if args is not None else None),
        ("rm", rm),
        ("gc_after", gc_after),
        ("sandbox", sandbox),
        ("allow_net", list(allow_net) if allow_net is not None else None),
        ("limits", limits or None),
    ):
        if value is not None:
            params[key] = value
    return params


def loop_params(
    name: str,
    argv: list[str],
    *,
    cron: str | None = None,
    once_at: str | float | None = None,
    tz: str | None = None,
    overlap: str = "queue",
    max_concurrency: int = 1,
    timeout: float | None = None,
    cwd: str | None = None,
    keep_agents: bool = False,
    env: dict[str, str] | None = None,
) -> dict:
    """The ``loop.create`` params of :meth:`orcr_core.sdk.Orcr.loop_create`'s arguments:
    this machine's zone, an absolute ``cwd``, this process's ``PATH``."""
    from orcr_core.loops.zone import local_zone_name

    params = {
        "name": name,
        "argv": list(argv),
        "tz": tz or local_zone_name(),
        "overlap": overlap,
        "max_concurrency": max_concurrency,
        "cwd": os.path.abspath(cwd or os.getcwd()),
        "keep_agents": keep_agents,
    }
    if os.environ.get("PATH") is not None:
        params["path_env"] = os.environ["PATH"]
    for key, value in (
        ("cron", cron),
        ("once_at", once_at),
        ("timeout", timeout),
        ("env", env),
    ):
        if value is not None:
            params[key] = value
    return params
