"""What ``orcr loop logs`` prints: a loop's event rows, or its runs' output, and follows them."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from orcr_core.cli.errors import OrcrCliError


def _event_line(ev: dict) -> str:
    from datetime import datetime

    ts = datetime.fromtimestamp(ev["ts"]).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    data = dict(ev["data"])
    run = data.pop("run_id", None)
    data.pop("name", None)
    fields = " ".join(f"{k}={v}" for k, v in data.items() if v is not None)
    return f"{ts} {ev['kind']}" + (f" {run}" if run else "") + (f" {fields}" if fields else "")


def follow_events(orcr, name, run_id, follow):
    seq = 0
    while True:
        res = orcr.loop_logs(name, run=run_id, source="orcr", since_seq=seq)
        for ev in res["events"]:
            click.echo(_event_line(ev))
            seq = ev["seq"]
        if not follow:
            return
        lp = res["loop"]
        if not res["events"]:
            if run_id and res["run"]["status"] not in _UNFINISHED:
                return  # the run has ended and its last rows are printed
            if lp["status"] == "ended" and not lp["running"] and not lp["pending"]:
                return
            time.sleep(0.5)  # a terminal follower polls; nothing waits on it


_UNFINISHED = ("pending", "running", "stopping")


def _log_removed(r: dict) -> bool:
    """An ended run that started but whose log file is gone: pruned by keep_runs."""
    return r["status"] not in _UNFINISHED and r["started_at"] and not Path(r["log"]).exists()


def _removed_error(r: dict) -> OrcrCliError:
    return OrcrCliError(
        f"{r['path']} ({r['status']}): its log was removed; only the newest "
        "loops.keep_runs ended runs of a loop keep their logs (orcr loop logs "
        f"{r['path'].split('/')[0]} --run {r['run_id']} shows what orcr did)"
    )


def show_run_logs(orcr, name, run_id, follow):
    res = orcr.loop_logs(name, run=run_id, source="run")
    rows = res["runs"]
    if run_id and rows and _log_removed(rows[0]):
        raise _removed_error(rows[0])
    if not follow:
        many = len(rows) > 1
        removed = 0
        for r in rows:
            p = Path(r["log"])
            if not p.exists():
                removed += bool(_log_removed(r))
                continue
            if many:
                click.echo(f"==> {r['path']} ({r['status']}) <==")
            sys.stdout.buffer.write(p.read_bytes())
            sys.stdout.flush()
        if removed:
            click.echo(
                f"({removed} older run(s) of {name}: logs removed, loops.keep_runs)", err=True
            )
        return
    started = [r for r in rows if r["status"] != "pending"] or rows
    if not started:
        return
    target = started[-1]
    p = Path(target["log"])
    pos = 0
    while True:
        if p.exists():
            with p.open("rb") as f:
                f.seek(pos)
                chunk = f.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
                pos += len(chunk)
        runs = orcr.loop_logs(name, run=target["run_id"], source="run")["runs"]
        if runs and runs[0]["status"] not in ("pending", "running", "stopping"):
            if p.exists() and p.stat().st_size > pos:
                continue
            return
        time.sleep(0.2)  # a terminal follower polls the file
