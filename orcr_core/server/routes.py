"""The socket's route table: one decorator registers every socket method.

Each ``*_handlers`` module of this room decorates its handlers with :func:`route`;
:mod:`orcr_core.server.handlers` imports them all and dispatches through
:data:`ROUTES`, so the table the docs test lists is the one the listener serves.
A name registered twice is refused at import (a second module silently taking a
method over was possible with the six per-module ``method`` decorators this
replaced). No plugin registers socket methods; this is internal to the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orcr_core.protocol import ProtocolError

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: ``handler(server, conn, rid, params) -> result`` (or ``STREAMED``)
Handler = Callable[[Any, Any, Any, dict], Any]

#: socket method name -> handler; filled at import of the handler modules
ROUTES: dict[str, Handler] = {}


class RouteError(Exception):
    """A socket method registered twice: a bug caught when the server imports."""


def route(
    name: str, *, short: bool = False, errors: tuple[type[Exception], ...] = ()
) -> Callable[[Callable], Callable]:
    """Register the decorated function as the handler of socket method ``name``.

    ``short``: the function takes ``(server, params)`` only (it neither streams nor
    reads the connection). ``errors``: exceptions carrying a ``code`` that are
    answered as ``ProtocolError(code, message)`` (e.g. ``LoopError``, ``VcsError``).
    The function is returned unchanged, so callers and tests may call it directly.
    """

    def deco(fn: Callable) -> Callable:
        if name in ROUTES:
            old = ROUTES[name]
            raise RouteError(
                f"socket method {name!r} is registered twice: by "
                f"{old.__module__}.{old.__qualname__} and by {fn.__module__}.{fn.__qualname__}"
            )
        handler = fn
        if short or errors:

            def handler(server: ServerContext, conn, rid, params):
                try:
                    return fn(server, params) if short else fn(server, conn, rid, params)
                except errors as exc:
                    raise ProtocolError(exc.code, str(exc)) from None  # type: ignore[attr-defined]

            handler.__module__, handler.__qualname__ = fn.__module__, fn.__qualname__
        ROUTES[name] = handler
        return fn

    return deco
