"""What ``orcr top`` shows of a loop: its schedule, next fire, runs and last run."""

from __future__ import annotations

from datetime import datetime


def local_time(value: str | None) -> str | None:
    """An RFC 3339 instant in this machine's local time: ``2026-12-01 09:00 CET``."""
    if not value:
        return None
    dt = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone()
    return dt.strftime("%Y-%m-%d %H:%M %Z")


def loop_info(loop: dict) -> dict:
    """What the view shows of a loop: schedule, next fire, runs, last run."""
    last = loop.get("last_run") or {}
    schedule = loop.get("cron") or (f"once at {loop['once_at']}" if loop.get("once_at") else "")
    return {
        "name": loop["name"],
        "uuid": loop.get("uuid"),
        "status": loop.get("status"),
        "schedule": schedule,
        "tz": loop.get("tz"),
        "next_fire_at": loop.get("next_fire_at"),
        "next_fire": local_time(loop.get("next_fire_at")),
        "running": loop.get("running", 0),
        "pending": loop.get("pending", 0),
        "last_run": last.get("run_id"),
        "last_run_status": last.get("status"),
        "missed": (loop.get("last_missed") or {}).get("why"),
    }


def loop_summary(info: dict) -> str:
    """``loop 0 9 * * 1-5 Europe/Paris · next 2026-12-01 09:00 CET · 1 running · last ok``."""
    parts = [f"loop {info['schedule']} {info['tz'] or ''}".rstrip()]
    if info["status"] == "paused":
        parts.append("PAUSED")
    elif info["next_fire"]:
        parts.append(f"next {info['next_fire']}")
    parts.append(f"{info['running']} running, {info['pending']} pending")
    if info["last_run_status"]:
        parts.append(f"last {info['last_run_status']}")
    if info.get("missed"):  # the machine was off, not the loop broken
        parts.append(f"missed: {info['missed']}")
    return " · ".join(parts)
