"""A provider adapter held to its contract.

orcr runs adapters, third parties' included, inside its server. One that raises,
returns the wrong shape or never answers must cost only its own agent: never
the monitor thread that watches every agent, never the server. So the registry
hands out each provider wrapped in :class:`GuardedProvider`, and every hook call
(the transcript reader's ``poll`` too) goes through :func:`call`:

- it runs on one of a few reused daemon threads and is given up after
  ``timeout`` seconds (a Python thread cannot be stopped: a hung call keeps its
  thread, another takes its place, and its result, if it ever comes, is dropped);
- :class:`ProviderError` and ``OSError`` pass through unchanged: they are the
  contract's own refusals ("unsupported version", "unreadable file");
- anything else it raises, a result of the wrong shape, or no answer in time
  becomes a :class:`ProviderFault` naming the provider and the hook. The start
  pipeline and the monitor end that agent ``failed`` with it.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from orcr_core.contracts import (
    InputState,
    ProviderError,
    ProviderFault,
    ScreenState,
    SessionPointer,
    TurnState,
)

#: seconds a hook may take before it counts as hung (``timings.provider_call``)
DEFAULT_TIMEOUT = 30.0


def _argv(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(a, str) for a in v)


def _env(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(k, str) and (x is None or isinstance(x, str)) for k, x in v.items()
    )


def _optional(kind) -> Callable[[Any], bool]:
    return lambda v: v is None or isinstance(v, kind)


#: what each hook of the contract must return (docs/plugins/hooks.md); a hook not
#: listed here is only guarded against raising and hanging
SHAPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "launch_argv": (_argv, "a non-empty list of strings"),
    "resume_argv": (_argv, "a non-empty list of strings"),
    "launch_env": (lambda v: v is None or _env(v), "a dict of str to str or None"),
    "launch_session": (_optional(SessionPointer), "a SessionPointer or None"),
    "find_session": (_optional(SessionPointer), "a SessionPointer or None"),
    "locate_transcript": (_optional((str, os.PathLike)), "a path or None"),
    "check_version": (_optional(str), "a warning string or None"),
    "screen_state": (_optional(ScreenState), "a ScreenState or None"),
    "input_state": (_optional(InputState), "an InputState or None"),
    "poll": (lambda v: isinstance(v, TurnState), "a TurnState"),
    "open_reader": (lambda v: callable(getattr(v, "poll", None)), "a reader with a poll() method"),
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Workers:
    """Daemon threads that run hook calls, reused: a thread per call cost ~100 us,
    a queued job ~40 us (every transcript poll goes through here). A hung call keeps
    its thread; the next call that finds no free thread starts another. Daemonic, so
    a hook that never returns cannot hold up the server's exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._free = 0  # threads waiting for a job and not yet promised one
        self._lock = threading.Lock()

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._free == 0
            if not spawn:
                self._free -= 1
        self._jobs.put(job)
        if spawn:
            threading.Thread(target=self._loop, name="orcr-provider-call", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._free += 1


_WORKERS = _Workers()


def call(provider: str, hook: str, fn: Callable, args: tuple, kwargs: dict, timeout: float):
    """``fn(*args, **kwargs)`` held to the contract (see the module's docstring)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def job() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # SystemExit in a hook is the hook's fault too
            box["error"] = exc
        finally:
            done.set()

    _WORKERS.run(job)
    if not done.wait(timeout):
        raise ProviderFault(provider, hook, f"no answer in {timeout:g}s (timings.provider_call)")
    exc = box.get("error")
    if exc is not None:
        if isinstance(exc, ProviderError | OSError):
            raise exc
        raise ProviderFault(provider, hook, f"raised {type(exc).__name__}: {exc}") from exc
    value = box["value"]
    shape = SHAPES.get(hook)
    if shape is not None and not shape[0](value):
        raise ProviderFault(provider, hook, f"returned {_short(value)}, not {shape[1]}")
    return value


class _Guarded:
    """Attributes pass through; callables come back held to the contract."""

    def __init__(self, target: Any, provider: str, timeouts: dict[str, float]):
        self._target = target
        self._provider = provider
        self._timeouts = timeouts  # shared with the registry: a config reload updates it

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or not callable(value) or isinstance(value, type):
            return value

        def guarded(*args, **kwargs):
            result = call(
                self._provider, name, value, args, kwargs, self._timeouts["provider_call"]
            )
            if name == "open_reader":
                return _Guarded(result, self._provider, self._timeouts)
            return result

        guarded.__name__ = name
        guarded.__doc__ = getattr(value, "__doc__", None)
        return guarded

    def __repr__(self) -> str:
        return f"<guarded {self._target!r}>"


class GuardedProvider(_Guarded):
    """A provider adapter whose every hook call is held to the contract.

    ``unwrap()`` gives the adapter itself (tests, ``orcr plugins``).
    """

    def unwrap(self) -> Any:
        return self._target
