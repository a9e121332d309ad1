"""What the CLI verbs share: the SDK client and the plain-text shapes they print.

Kept free of heavy imports: the client path (``agent run|ls|get|kill``) loads it.
"""

from __future__ import annotations

import json as jsonlib

from orcr_core.cli.codes import echo


def sdk(socket_path: str | None = None):
    """The SDK client, imported when a verb first needs the server."""
    from orcr_core.sdk import Orcr

    if socket_path is None:
        return Orcr()
    from orcr_core.sdk.client import Client

    return Orcr(Client(socket_path))


def echo_table(cols: tuple, data: list[tuple]) -> None:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max([len(c)] + [len(str(r[i])) for r in data]) for i, c in enumerate(cols)]
    for r in [cols, *data]:
        echo("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def echo_results(res: list[dict], json_: bool) -> None:
    """What a verb did to each target: one ``<path> <result>`` line, or the JSON list."""
    if json_:
        echo(jsonlib.dumps(res))
        return
    for r in res:
        echo(f"{r['path']} {r['result']}")


def capabilities(caps: dict | None) -> str:
    """A multiplexer's ping capabilities: ``health_check, live_handoff, endpoint_protocol_generation=1``."""
    if not caps:
        return "none reported"
    return ", ".join(k if v is True else f"{k}={v}" for k, v in caps.items())
