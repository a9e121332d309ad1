"""Plain-text rendering of a frame (``orcr top --once``) and the header line the
screen shares with it."""

from __future__ import annotations

import time

from orcr_core.kit.activities import activity_line
from orcr_core.top.loops import loop_summary
from orcr_core.top.rows import STATUSES, duration, flag, mem_text, tokens_text

COLUMNS = (
    "PATH", "PROVIDER", "STATUS", "TIME", "TURN", "TOKENS", "MEM", "STALLED", "EXIT", "ANSWER"
)  # fmt: skip


def header_line(h: dict) -> str:
    """``queue 3  live 12/25  claude 5/10 …  drift …  tmux ok``."""
    cap = h["cap"] if h.get("cap") is not None else "-"
    parts = [f"queue {h['queue_depth']}", f"live {h['live']}/{cap}"]
    for name, p in h["providers"].items():
        if p["cap"] is None and not p["live"]:
            continue  # an installed provider with no cap and nothing running
        pcap = p["cap"] if p["cap"] is not None else "-"
        parts.append(f"{name} {p['live']}/{pcap}")
    if h.get("stalled"):
        parts.append(f"stalled {h['stalled']}")
    if h.get("blocked"):
        parts.append(f"blocked {h['blocked']}")
    if h.get("parked"):
        parts.append(f"parked {h['parked']}")
    if h.get("tokens") is not None:  # the fleet's spend: the agents in view (docs/usage.md)
        parts.append(f"tokens {tokens_text(h['tokens'])}")
    return "  ".join(parts)


def held_line(h: dict) -> str | None:
    """Why queued agents are held back, when the server reports it."""
    held = h.get("held_back")
    if not held:
        return None
    if isinstance(held, dict):
        text = ", ".join(f"{k}: {v}" for k, v in held.items())
    elif isinstance(held, list):
        text = ", ".join(str(x) for x in held)
    else:
        text = str(held)
    return f"held back: {text}"


def _ago(iso: str) -> str:
    """How long ago an ISO 8601 UTC time was: 9s, 3m04s, 2h05m."""
    from datetime import datetime

    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "?"
    return duration(time.time() - then)


def drift_line(h: dict) -> str:
    d, at = h.get("drift") or {}, h.get("drift_at") or {}

    def total(name: str) -> str:
        # a count is a total over the store's life, not what is wrong now: say so,
        # with the age of its last change, so "lost 3" from last night reads as such
        n, when = d.get(name, 0), at.get(name)
        return f"{name} {n}" + (f" (total, last {_ago(when)} ago)" if n and when else "")

    drift = (
        f"drift {total('lost')} {total('repaired')} "
        f"orphan panes {d.get('orphan_agent_panes', 0)} unmarked {d.get('unmarked_panes', 0)}"
    )
    drv = h.get("driver")
    if drv is None:
        mux = "multiplexer ?"
    elif drv.get("error"):
        mux = f"{drv.get('name') or 'multiplexer'} DOWN: {drv['error']}"
    else:
        mux = f"{drv.get('name')} ok"
    if h.get("unmanaged") or (drv or {}).get("name") == "herdr":
        mux += f"  unmanaged {h.get('unmanaged', 0)}"  # orcr agent ls --unmanaged
    return f"{drift}  {mux}"


def group_label(name: str, agents: list[dict], loop: dict | None = None) -> str:
    counts: dict[str, int] = {}
    for a in agents:
        counts[a["status"]] = counts.get(a["status"], 0) + 1
    summary = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts.get(s))
    label = f"{name}/ ({summary or 'no agents'})"
    return f"{label}  {loop_summary(loop)}" if loop else label


def cells(a: dict) -> tuple[str, ...]:
    return (
        a["path"],
        a["provider"],
        a["status"] + (f" (held: {a['held']})" if a.get("held") else ""),
        duration(a["in_status"]),
        str(a["turn"]),
        tokens_text(a.get("tokens")),
        mem_text(a.get("memory")),  # memory/ceiling of a live agent's group
        flag(a.get("blocked"), a["stalled"], a.get("parked", False), a.get("worktree")),
        a["exit_reason"] or "",
        # a blocked agent shows what it waits for where its answer will be
        a.get("blocked") or (a["answer"] or "")[:80],
    )


def format_frame(frame: dict) -> str:
    h = frame["header"]
    lines = [header_line(h)]
    if held := held_line(h):
        lines.append(held)
    lines.append(drift_line(h))
    lines.extend(activity_line(a) for a in frame.get("activities") or [])
    rows: list[tuple[str, ...] | str] = [COLUMNS]
    for g in frame["groups"]:
        rows.append(group_label(g["name"], g["agents"], g.get("loop")))
        rows.extend(cells(a) for a in g["agents"])
    table = [r for r in rows if not isinstance(r, str)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS) - 1)]
    lines.append("")
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
        else:
            lines.append(
                "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
            )
    return "\n".join(line.rstrip() for line in lines)
