"""``orcr internal``: commands orcr's own agents run, not people (hidden from --help)."""

from __future__ import annotations

import json
import os

import click


@click.group(name="internal", hidden=True)
def internal():
    """Plumbing run by agents orcr started."""


@internal.command(name="codex-notify")
@click.argument("payload", required=False)
def codex_notify(payload):
    """Codex's notify program: report the thread id to orcr.

    Codex picks its own thread id and tells no multiplexer but herdr; orcr
    starts its Codex agents with -c notify=[..., "internal", "codex-notify"]
    and Codex runs this after each turn with a JSON payload carrying
    "thread-id". Never fails loudly: a notify program must not disturb Codex.
    """
    from orcr_core.sdk.client import Client, ServerError

    uuid, token = os.environ.get("ORCR_ID"), os.environ.get("ORCR_LAUNCH_TOKEN")
    try:
        thread = json.loads(payload or "{}").get("thread-id")
    except ValueError:
        thread = None
    if not (uuid and token and thread):
        return
    try:
        with Client(autostart=False) as c:
            c.call(
                "agent.report_session",
                uuid=uuid,
                launch_token=token,
                source="orcr:codex-notify",
                kind="id",
                value=str(thread),
            )
    except (ServerError, OSError):
        pass
