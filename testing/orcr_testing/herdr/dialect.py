"""What differs between the herdr releases the emulator speaks (HERDR-0.9.md).

One :class:`Dialect` per socket protocol: 19 and 20 are herdr 0.8 (the tagged
v0.8.0 and the 0.8 line), 22 is herdr 0.9.3 (every 0.9 release reports 22;
the emulator models 0.9.3, the newest covered). A protocol the emulator does
not know (a test of the driver's refusal, e.g. 18 or 21) speaks 0.8.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Dialect:
    protocol: int
    version: str
    #: a new subscription starts at the live edge; 0.8 replays the retained ring
    live_edge: bool = False
    #: events are drained in bounded batches; 0.8 sends one per entry per 100 ms wake
    batched: bool = False
    #: a subscriber that falls behind the ring gets ``events_lost`` (an error reply
    #: with the subscribe id) and its connection closed; 0.8 loses them silently
    events_lost: bool = False
    #: error replies echo a decodable request's string id; 0.8 answers ``"id":""``
    #: to a request it cannot parse as a request
    error_ids: bool = False
    #: a restored pane whose saved cwd is gone stays with ``restore_error``;
    #: 0.8 starts its shell in the home directory
    restore_error: bool = False
    #: ``AgentInfo.completion_seq``
    completion_seq: bool = False
    #: ``resume_argv`` on ``pane.report_agent`` / ``pane.report_agent_session``
    resume_argv: bool = False
    #: a self-reported agent is dropped while the pane's own shell is in the foreground
    drop_self_reported: bool = False
    #: ``workspace.close`` of a primary workspace with linked worktrees needs ``close_group``
    close_group: bool = False
    #: new panes get ``TERM_PROGRAM=herdr`` and none of the host's terminal-session
    #: ids or Claude Code markers
    clean_pane_env: bool = False
    #: methods this release does not have (answered ``unknown_method`` on 0.9)
    removed: frozenset[str] = frozenset()
    capabilities: dict = field(default_factory=dict)
    rows: int = 24
    cols: int = 80


HERDR_08 = Dialect(20, "0.8.0", capabilities={"live_handoff": True})

HERDR_09 = Dialect(
    22,
    "0.9.3",
    live_edge=True,
    batched=True,
    events_lost=True,
    error_ids=True,
    restore_error=True,
    completion_seq=True,
    resume_argv=True,
    drop_self_reported=True,
    close_group=True,
    clean_pane_env=True,
    # removed in 0.9.2 (shepherd's schema diff, HERDR-0.9.md §2), and absent from the
    # vendored 0.9 schema; every method that schema has is served (test_herdr_dialect_09)
    removed=frozenset({"pane.graphics.set", "pane.graphics.clear", "pane.graphics.info"}),
    capabilities={
        "live_handoff": True,
        "endpoint_protocol_generation": 1,
        "surface_interest": True,
        "health_check": True,
        "ssh_agent_registration": True,
    },
    rows=40,
    cols=120,
)

#: a batch of one subscription entry per wake (herdr drains "bounded batches")
BATCH = 64


def dialect_for(protocol: int) -> Dialect:
    if protocol == 22:
        return HERDR_09
    return Dialect(protocol, HERDR_08.version, capabilities=dict(HERDR_08.capabilities))
