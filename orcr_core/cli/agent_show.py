"""How ``orcr agent`` prints agents: the ls tables, usage, a turn's failure, an answer.

Import-light (the client path loads it).
"""

from __future__ import annotations

import re
import time

from orcr_core.cli.codes import echo
from orcr_core.cli.output import echo_table

#: the server's timestamps: UTC, milliseconds, a Z
_ISO_Z = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d(?:\.\d+)?)Z")


def epoch(iso: str) -> float:
    """Seconds since the epoch of an ISO 8601 timestamp; the server's UTC ``...Z``
    form without :mod:`datetime` (a millisecond or two of every ``agent ls``)."""
    m = _ISO_Z.fullmatch(iso)
    if m is None:
        from datetime import datetime

        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    y, mo, d, h, mi = (int(g) for g in m.groups()[:5])
    y -= mo <= 2  # days from the civil date (H. Hinnant's algorithm), March-based years
    era, yoe = divmod(y, 400)
    doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return days * 86400 + h * 3600 + mi * 60 + float(m.group(6))


def _age(iso: str | None) -> str:
    if not iso:
        return "-"
    secs = time.time() - epoch(iso)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


def tokens_text(u: dict | None) -> str:
    """A token count for a column: ``12.3k``; ``-`` when no usage was reported."""
    if not u:
        return "-"
    n = u["tokens"]
    return str(n) if n < 10_000 else f"{n / 1000:.1f}k" if n < 1_000_000 else f"{n / 1e6:.1f}M"


def usage_line(u: dict | None) -> str:
    if not u:
        return "-"
    parts = [f"{u['tokens']} tokens"]
    parts.append(
        f"in {u['input']} out {u['output']} cache-read {u['cache_read']} "
        f"cache-write {u['cache_write']}"
    )
    if u.get("model"):
        parts.append(u["model"])
    return " · ".join(parts)


#: endings whose ``error`` says why, shown short beside them in ``agent ls``
EXPLAINED_ENDS = ("failed", "lost", "oom")


def ended_reason(a: dict, width: int = 60) -> str:
    """``failed: claude: command not found``: an ended row's exit reason and, for a
    failed or lost one, its error's first line, cut to ``width``."""
    reason = a["exit_reason"]
    error = (a.get("error") or "").strip().splitlines()
    if reason not in EXPLAINED_ENDS or not error:
        return reason
    why = error[0] if len(error[0]) <= width else error[0][: width - 1] + "…"
    return f"{reason}: {why}"


def mem_text(m: dict | None) -> str:
    """``MEM``: a live agent's memory against its ceiling (``212M/12G``), ``-`` without
    a group (ended, queued, or no ceiling mechanism: docs/ceilings.md)."""
    if not m or m.get("current") is None:
        return "-"

    def short(n: int | None) -> str:
        if n is None:
            return "none"
        return f"{n / 2**30:.1f}G" if n >= 2**30 else f"{n / 2**20:.0f}M"

    return f"{short(m['current'])}/{short(m.get('max'))}"


def agent_table(rows: list[dict]) -> None:
    cols = ("PATH", "STATUS", "PROVIDER", "TOKENS", "MEM", "AGE", "UUID")
    data = []
    for a in rows:
        status = a["status"] + (f" ({ended_reason(a)})" if a["exit_reason"] else "")
        if a.get("stalled"):  # a flag beside the status, not a status of its own
            status += " (stalled)"
        if a.get("blocked"):
            status += " (blocked)"
        if a.get("waiting"):  # its CLI waits out a usage limit (orcr_core/usage_limits)
            status += f" (waiting: {a['waiting']})"
        if a.get("held"):  # queued, and the queue waits: "memory" or "multiplexer"
            status += f" (held: {a['held'].split(': ', 1)[0]})"
        if a.get("parked"):  # idle in the parking area: a prompt or an attach brings it back
            status += " (parked)"
        tokens = tokens_text(a.get("usage"))
        mem = mem_text(a.get("memory"))
        data.append(
            (a["path"], status, a["provider"], tokens, mem, _age(a["created_at"]), a["uuid"])
        )
    echo_table(cols, data)
    for a in rows:  # what it waits for, on a line of its own (a reason is long)
        if a.get("blocked"):
            echo(f"blocked {a['path']}: {a['blocked']}")


def unmanaged_table(rows: list[dict]) -> None:
    cols = ("SESSION", "TERMINAL", "KIND", "STATUS", "PANE", "CWD", "LABEL", "AGE")
    data = [
        (
            u["session"],
            u["terminal_id"],
            u["kind"],
            u["status"],
            u["pane_id"] or "-",
            u["cwd"] or "-",
            u["label"] or "-",
            _age(u["discovered_at"]),
        )
        for u in rows
    ]
    echo_table(cols, data)


#: how a turn ends without an answer
TURN_FAILURES = ("errored", "interrupted")


def turn_failure(path: str, turn, r: dict) -> str:
    why = r.get("turn_error") or r.get("error")
    words = (
        f"agent {path}: turn {turn} {r['turn_status']}"
        if turn
        else f"agent {path}: the last turn {r['turn_status']}"
    )
    return words + (f": {why}" if why else "; it has no answer")


#: terminal escape sequences (CSI, OSC) and the C0/C1 controls other than \t and \n
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text an agent wrote, safe to print on a terminal: line ends as ``\\n``, no
    escape sequences, no control characters but tab and newline (a BEL or ^C in an
    answer is never meant for your terminal; ``--json`` keeps the text as it was)."""
    text = text.replace("\r\n", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))
