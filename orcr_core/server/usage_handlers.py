"""Socket method ``usage.sum`` (registered in the route table,
:mod:`orcr_core.server.routes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orcr_core.protocol import ProtocolError
from orcr_core.server.routes import route

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def _opt(params: dict, key: str, kinds: tuple):
    value = params.get(key)
    if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
        raise ProtocolError("invalid_params", f"parameter {key!r} has the wrong type")
    return value


@route("usage.sum")
def usage_sum(server: ServerContext, conn, rid, params):
    """Tokens spent by the turns of the agents under ``prefix``, since ``since``
    (epoch seconds), grouped ``by`` path, provider, model, loop or day."""
    from orcr_core.usage import sums

    prefix = _opt(params, "prefix", (str,))
    since = _opt(params, "since", (int, float))
    by = _opt(params, "by", (str,))
    prices = {p["model"]: p for p in server.config.get("usage.prices") or []}
    try:
        return sums.summarize(prefix, since, by, prices)
    except ValueError as exc:
        raise ProtocolError("invalid_params", str(exc)) from None
