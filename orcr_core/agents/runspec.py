"""What a run asks for (:class:`RunSpec`) and the checks admission makes before its
transaction: the provider, the prompt, the path's grammar, the run's options and
ceilings. Each refusal is an :class:`AdmissionError` whose code names what was wrong
and whose message says what is allowed. The transaction itself (names, caps, the
row) is :func:`orcr_core.agents.queue.admit`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from orcr_core import paths
from orcr_core.protocol import MAX_TURN_TIMEOUT, prompt_not_utf8, prompt_too_large


class AdmissionError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class RunSpec:
    provider: str
    cwd: str
    prompt: str | None = None
    path: str | None = None  # relative to scope
    name: str | None = None  # last segment, relative to scope
    scope: str | None = None  # ORCR_PATH of the caller
    timeout: float | None = None
    argv: list[str] | None = None  # command provider: the agent's argv
    worktree: bool = False  # a checkout of its own (orcr_core/workspaces)
    branch: str | None = None
    base: str | None = None
    model: str | None = None  # per-run provider options (over [providers.<name>])
    args: list[str] | None = None
    rm: bool = False  # end the agent (done) when its first turn ends
    gc_after: float | None = None  # this agent's timings.gc_after, in seconds
    sandbox: bool | None = None  # --sandbox/--no-sandbox; None: [sandbox] default
    allow_net: list[str] | None = None  # --allow-net: over the config's and the provider's
    parent: dict | None = None  # started from inside this sandboxed agent (its policy)
    limits: dict | None = None  # this run's ceilings (orcr_core/ceilings): memory_max, ...


#: the range of a per-run --gc-after, as timings.gc_after's (seconds)
GC_AFTER_RANGE = (1.0, 365 * 86400.0)


def clean_prompt(prompt: str) -> str:
    """A prompt as it is typed into the pane: line ends normalised to ``\n``.

    Refuses text that is not valid UTF-8 (``invalid_prompt``, naming the byte
    offset): it could never be typed. Refuses an empty or whitespace-only prompt for every provider: typed into a
    TUI it starts no turn, so the agent would sit ``working`` forever. An agent
    run with no prompt at all starts ``idle`` instead.
    """
    why = prompt_not_utf8(prompt)
    if why:
        raise AdmissionError("invalid_prompt", why)
    prompt = prompt.replace("\r\n", "\n").replace("\r", "\n")
    if not prompt.strip():
        raise AdmissionError(
            "empty_prompt",
            "the prompt is empty or only whitespace; give a prompt, or none at all "
            "to start the agent idle (then orcr agent send)",
        )
    why = prompt_too_large(prompt)
    if why:
        raise AdmissionError("prompt_too_large", why)
    return prompt


def resolve_path(spec: RunSpec) -> tuple[str | None, str | None]:
    """(full path or None for auto-name, scope) after grammar checks."""
    if spec.scope:
        paths.validate(spec.scope, "ORCR_PATH scope")
    if spec.path is not None and spec.name is not None:
        raise AdmissionError("invalid_params", "give --path or --name, not both")
    for flag, value in (("path", spec.path), ("name", spec.name)):
        if value is not None and not value.strip():
            raise AdmissionError(
                "invalid_path",
                f"--{flag} is empty; give one like review/file_1, or leave --{flag} out "
                "to have the path picked for you",
            )
    rel = spec.path if spec.path is not None else spec.name
    if spec.name and "/" in spec.name:
        raise AdmissionError(
            "invalid_path", f"--name {spec.name!r} is one segment; use --path for a path"
        )
    if rel is None:
        return None, spec.scope
    full = paths.join(spec.scope, rel)
    try:
        paths.validate(full)
    except paths.PathError as exc:
        raise AdmissionError("invalid_path", str(exc)) from None
    return full, spec.scope


def validate_spec(spec: RunSpec, providers: dict, options: dict | None = None) -> None:
    """Everything admission can know; ``options`` are the provider's config options.

    Normalises ``spec.prompt`` (:func:`clean_prompt`).
    """
    if spec.provider not in providers:
        installed = ", ".join(sorted(providers)) or "none"
        raise AdmissionError(
            "unknown_provider",
            f"unknown provider {spec.provider!r}; installed providers: {installed} "
            "(orcr plugins lists them; orcr install adds more)",
        )
    if spec.prompt is not None:
        spec.prompt = clean_prompt(spec.prompt)
    if spec.timeout is not None and not (0 < spec.timeout <= MAX_TURN_TIMEOUT):
        raise AdmissionError("invalid_timeout", f"timeout {spec.timeout}s must be >0 and <= 7 days")
    if not os.path.isabs(spec.cwd) or not os.path.isdir(spec.cwd):
        raise AdmissionError(
            "invalid_cwd", f"cwd {spec.cwd!r} is not an existing absolute directory"
        )
    if spec.argv is not None and (not spec.argv or not all(isinstance(a, str) for a in spec.argv)):
        raise AdmissionError("invalid_params", "argv must be a non-empty list of strings")
    _check_run_options(spec, providers)
    low, high = GC_AFTER_RANGE
    if spec.gc_after is not None and (
        isinstance(spec.gc_after, bool)
        or not isinstance(spec.gc_after, int | float)
        or not low <= spec.gc_after <= high
    ):
        raise AdmissionError(
            "invalid_params",
            f"gc_after {spec.gc_after!r} must be a number of seconds from 1 to 365 days "
            "(--gc-after 10m, 2h, 7d)",
        )
    if (spec.branch is not None or spec.base is not None) and not spec.worktree:
        raise AdmissionError(
            "invalid_params", "--branch and --base need --worktree (the agent's own checkout)"
        )
    if getattr(providers[spec.provider], "needs_argv", False) and not (
        spec.argv or (options or {}).get("argv")
    ):
        raise AdmissionError(
            "missing_argv",
            f"the {spec.provider} provider runs a command you give: "
            f"orcr agent run --provider {spec.provider} -- PROGRAM [ARGS...] "
            f"(or set [providers.{spec.provider}] argv in the config)",
        )


def check_limits(spec: RunSpec, config) -> None:
    """Per-run ceilings: valid values, and a mechanism that holds them (else
    ``limits_unavailable``; a global ``[limits]`` default alone only warns)."""
    from orcr_core.ceilings import LimitsError, check_run
    from orcr_core.ceilings.step import refusal

    try:
        spec.limits = check_run(spec.limits) or None
    except LimitsError as exc:
        raise AdmissionError(exc.code, str(exc)) from None
    why = refusal(config, spec.provider, spec.limits) if config is not None else None
    if why:
        raise AdmissionError("limits_unavailable", why)


def _check_run_options(spec: RunSpec, providers: dict) -> None:
    """--model and --arg only for a provider whose adapter takes them (``run_options``);
    a refusal names the installed providers that do, from their adapters."""
    takes = getattr(providers[spec.provider], "run_options", ())
    for option, value in (("model", spec.model), ("args", spec.args)):
        if value is None:
            continue
        flag = "--model" if option == "model" else "--arg"
        if option not in takes:
            hint = " (give the whole argv after --)" if spec.provider == "command" else ""
            raise AdmissionError(
                "unsupported_option",
                f"{flag} is not taken by the {spec.provider} provider{hint}; installed "
                f"providers that take it: {', '.join(takers(providers, option)) or 'none'}",
            )
    if spec.model is not None and (not isinstance(spec.model, str) or not spec.model.strip()):
        raise AdmissionError("invalid_params", "--model is empty; give a model name")
    if spec.args is not None and not all(isinstance(a, str) for a in spec.args):
        raise AdmissionError("invalid_params", "args must be a list of strings")


def takers(providers: dict, option: str) -> list[str]:
    """The providers whose adapter takes ``option`` (``model``, ``args``), sorted."""
    return sorted(n for n, p in providers.items() if option in getattr(p, "run_options", ()))
