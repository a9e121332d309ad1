"""The notifier in the server: the durable cursor, the outbox, one thread per sink.

The matcher reads event rows past its cursor (``meta.notify_cursor``), asks
:mod:`orcr_core.notify.rules` what each is worth, and inserts one ``held``
notification row per sink in the transaction that moves the persisted cursor;
an in-memory cursor pin holds retention back meanwhile, like a watch's. A batch
that matches nothing moves the persisted cursor only now and then (every
CURSOR_EVERY seconds): after a crash it is read again, and the unique index
(sink, seq, rule, subject) makes the re-insert a no-op.

Each sink's thread releases held rows once their gather window is over (one
notification per subject per rule per ``notify.window``; more than
``notify.burst`` of one rule at once, or a subject twice, become one digest),
then sends pending rows in order: ``send`` first, then the ``sent`` mark, so a
crash between the two sends it again with the same ``key`` (at least once). A
failed send is retried with backoff (1 s doubling to 5 min) until
``notify.retry_for`` has passed since the row was made, then it is
``undeliverable``: a ``notify.undeliverable`` event and a line in server status.
A slow or dead sink holds only its own thread: the monitor and the queue never
wait on it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

from orcr_core.common.backoff import Backoff
from orcr_core.notify import notices, rules
from orcr_core.store import events, faults
from orcr_core.store.models import Agent, Loop, Meta, Notification, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.notify")

CURSOR_EVERY = 10.0  # seconds between cursor writes for batches that matched nothing
BATCH = 500
BACKOFF_MIN, BACKOFF_MAX = 1.0, 300.0
RETRY = Backoff(BACKOFF_MIN, BACKOFF_MAX)  # a failed send waits RETRY.after(attempts)
IDLE_WAIT = 5.0  # a sink thread with nothing due re-checks this often (stop, config)


class Notifier:
    def __init__(self, server: ServerContext) -> None:
        self.server = server
        self.sinks: dict[str, object] = {}
        self.options: dict[str, dict] = {}
        self.errors: dict[str, str] = {}  # sinks a bad option left off, and why
        self.kicks: dict[str, threading.Event] = {}
        self.cursor = 0
        self._saved_at = 0.0
        self._saved = 0
        self._pin: int | None = None

    # -- sinks ---------------------------------------------------------------------------
    def context(self):
        return SimpleNamespace(config=self.server.config, driver=lambda: self.server.driver)

    def load_sinks(self) -> list[str]:
        """(Re)make each registered sink from ``notify.<name>``; the names that are new."""
        new = []
        for name, factory in sorted(self.server.registry.sinks.items()):
            opts = dict(self.server.config.get(f"notify.{name}") or {})
            if name in self.options and self.options[name] == opts:
                continue
            self.options[name] = opts
            try:
                sink = factory(opts, self.context())
            except Exception as exc:
                self.errors[name] = str(exc)
                self.sinks.pop(name, None)
                log.warning("notify sink %s is off: %s", name, exc)
                continue
            self.errors.pop(name, None)
            if sink is None:
                self.sinks.pop(name, None)
                continue
            if name not in self.sinks and name not in self.kicks:
                new.append(name)
            self.sinks[name] = sink
        return new

    def reconfigure(self) -> None:
        """The config changed (``orcr config set``): new and changed sinks take effect.
        The first sink makes the cursor durable from here on."""
        had = bool(self.sinks)
        for name in self.load_sinks():
            self._start_sink(name)
        if self.sinks and not had:
            self._save(self.cursor)
        self.kick()

    def _save(self, cursor: int, rows: list[dict] = ()) -> None:
        with db.atomic("IMMEDIATE"):
            if rows:
                Notification.insert_many(rows).on_conflict_ignore().execute()
            Meta.replace(key="notify_cursor", value=str(cursor)).execute()
        self._saved, self._saved_at = cursor, time.time()

    # -- threads -------------------------------------------------------------------------
    def start(self) -> list[threading.Thread]:
        """Read the persisted cursor and pin it; start the matcher and the sinks.

        With no sink configured nothing is written, ever (an idle server without
        notifications pays no write for them): the cursor follows the log in memory,
        and the first sink configured later persists it from that moment on."""
        self.load_sinks()
        row = Meta.get_or_none(Meta.key == "notify_cursor")
        if row is None or not self.sinks:  # no history: notifications start from now
            self.cursor = self._saved = events.last_seq()
            if self.sinks:
                self._save(self.cursor)
        else:
            self.cursor = self._saved = int(row.value)
        self._pin = self.server.bus.pin(self.cursor)
        self.threads = [self._thread(self.match_loop, "orcr-notify")]
        # notices (a task parked or failed) waiting since before this start, then on a timer
        self.threads.append(self._thread(notices.drain_loop, "orcr-notices", self.server))
        for name in list(self.sinks):
            self._start_sink(name)
        return self.threads

    def _thread(self, target, name, *args) -> threading.Thread:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        return t

    def _start_sink(self, name: str) -> None:
        self.kicks[name] = threading.Event()
        self.threads.append(self._thread(self.sink_loop, f"orcr-notify-{name}", name))

    def kick(self) -> None:
        for ev in list(self.kicks.values()):
            ev.set()

    # -- matching ------------------------------------------------------------------------
    def facts(self, ev: dict) -> dict:
        if ev["kind"] == "run.status" and ev.get("loop"):
            loop = Loop.get_or_none(Loop.uuid == ev["loop"])
            return {"loop_name": loop.name if loop else None}
        if ev["kind"] == "agent.status" and ev["data"].get("to") == "idle" and ev.get("agent"):
            a = Agent.get_or_none(Agent.uuid == ev["agent"])
            if a is not None and a.turn_started_at:
                return {"turn_seconds": max(ev["ts"] - a.turn_started_at, 0.0)}
        return {}

    def match_once(self) -> int:
        """Match one batch past the cursor; the number of events read."""
        evs = events.since(self.cursor, BATCH)
        if not evs:
            return 0
        cfg, now = self.server.config, time.time()
        gather = cfg.duration("notify.gather")
        rows = []
        for ev in evs:
            for rule, subject, note in rules.notes_for(ev, cfg, self.facts(ev)):
                body = json.dumps(note, separators=(",", ":"))
                for sink in self.sinks:
                    rows.append(
                        dict(
                            sink=sink,
                            seq=ev["seq"],
                            rule=rule,
                            subject=subject,
                            body=body,
                            state="held",
                            due=now + gather,
                            created=now,
                        )
                    )
        last = evs[-1]["seq"]
        if rows or (self.sinks and now - self._saved_at >= CURSOR_EVERY):
            self._save(last, rows)
        self.cursor = last
        if not self.sinks:
            self._saved = last  # nothing to make durable
        # read events may go: those past the persisted cursor matched nothing (a match
        # persists the cursor), so a crash that reads them again would find nothing in them
        self.server.bus.move_pin(self._pin, self.cursor)
        if rows:
            faults.point("notify_after_match")
            self.kick()
        return len(evs)

    def match_loop(self) -> None:
        db.connect(reuse_if_open=True)
        while not self.server.stopping.is_set():
            gen = self.server.bus.generation()
            try:
                if self.match_once() == BATCH:
                    continue
            except Exception as exc:
                if self.server.store_error(exc):  # a damaged store: said once, by the server
                    return
                log.exception("notify: matching failed; retrying")
                if self.server.stopping.wait(1.0):
                    return
            if self._saved != self.cursor:  # a quiet moment: let retention go past
                timeout = CURSOR_EVERY
            else:
                timeout = None
            self.server.bus.wait(gen, timeout=timeout)
            if timeout is not None and self.server.bus.generation() == gen and self.sinks:
                self._save(self.cursor)

    # -- delivery ------------------------------------------------------------------------
    def release(self, sink: str, now: float) -> None:
        """Held rows whose gather window is over become pending, digested or wait on."""
        cfg = self.server.config
        window, burst = cfg.duration("notify.window"), int(cfg.get("notify.burst"))
        held = list(
            Notification.select()
            .where(
                (Notification.sink == sink)
                & (Notification.state == "held")
                & (Notification.due <= now)
            )
            .order_by(Notification.id)
        )
        if not held:
            return
        by_rule: dict[str, list] = {}
        for row in held:
            by_rule.setdefault(row.rule, []).append(row)
        with db.atomic("IMMEDIATE"):
            for rule, group in by_rule.items():
                fresh, wait = [], {}
                for row in group:
                    last = (
                        Notification.select(Notification.created)
                        .where(
                            (Notification.sink == sink)
                            & (Notification.rule == rule)
                            & (Notification.subject == row.subject)
                            & (Notification.state.in_(("pending", "sent", "undeliverable")))
                            & (Notification.created > now - window)
                        )
                        .order_by(Notification.created.desc())
                        .first()
                    )
                    if last is None or row.subject == "*":
                        fresh.append(row)
                    else:
                        wait[row.id] = last.created + window
                for row_id, until in wait.items():
                    Notification.update(due=until).where(Notification.id == row_id).execute()
                if not fresh:
                    continue
                subjects = [r.subject for r in fresh]
                if len(fresh) > burst or len(set(subjects)) < len(subjects):
                    note = rules.digest(rule, [json.loads(r.body) for r in fresh])
                    Notification.insert(
                        sink=sink,
                        seq=max(r.seq for r in fresh),
                        rule=rule,
                        subject="*",
                        body=json.dumps(note, separators=(",", ":")),
                        state="pending",
                        due=now,
                        created=now,
                    ).on_conflict_ignore().execute()
                    state = "digested"
                else:
                    state = "pending"
                ids = [r.id for r in fresh]
                Notification.update(state=state, created=now).where(
                    Notification.id.in_(ids)
                ).execute()

    def attempt(self, name: str, row: Notification) -> None:
        sink, now = self.sinks.get(name), time.time()
        try:
            if sink is None:
                raise RuntimeError(self.errors.get(name) or f"sink {name} is off")
            receipt = sink.send(json.loads(row.body))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
            retry_for = self.server.config.duration("notify.retry_for")
            with db.atomic("IMMEDIATE"):
                if now - row.created >= retry_for:
                    Notification.update(
                        state="undeliverable", attempts=row.attempts + 1, error=error
                    ).where(Notification.id == row.id).execute()
                    events.emit(
                        "notify.undeliverable",
                        sink=name,
                        rule=row.rule,
                        key=json.loads(row.body)["key"],
                        attempts=row.attempts + 1,
                        error=error,
                    )
                    log.warning("notify: %s gave up on %s: %s", name, row.seq, error)
                else:
                    delay = RETRY.after(row.attempts)
                    Notification.update(
                        due=now + delay, attempts=row.attempts + 1, error=error
                    ).where(Notification.id == row.id).execute()
            self.server.bus.notify()
            return
        faults.point("notify_after_send")
        with db.atomic("IMMEDIATE"):
            Notification.update(
                state="sent", sent_at=time.time(), attempts=row.attempts + 1, error=receipt
            ).where(Notification.id == row.id).execute()

    def sink_loop(self, name: str) -> None:
        db.connect(reuse_if_open=True)
        kick = self.kicks[name]
        while not self.server.stopping.is_set():
            kick.clear()
            now = time.time()
            try:
                self.release(name, now)
                row = (
                    Notification.select()
                    .where(
                        (Notification.sink == name)
                        & (Notification.state == "pending")
                        & (Notification.due <= now)
                    )
                    .order_by(Notification.id)
                    .first()
                )
                if row is not None:
                    self.attempt(name, row)
                    continue
                nxt = (
                    Notification.select(Notification.due)
                    .where(
                        (Notification.sink == name) & Notification.state.in_(("held", "pending"))
                    )
                    .order_by(Notification.due)
                    .first()
                )
            except Exception as exc:
                if self.server.store_error(exc):
                    return
                log.exception("notify: sink %s thread failed; retrying", name)
                nxt = None
            timeout = IDLE_WAIT if nxt is None else min(max(nxt.due - now, 0.01), IDLE_WAIT)
            kick.wait(timeout)

    # -- reports -------------------------------------------------------------------------
    def status(self) -> dict:
        """For server status: sinks, rows waiting, undeliverable ones and the last."""
        counts = dict(
            Notification.select(Notification.state, db_count())
            .group_by(Notification.state)
            .tuples()
        )
        bad = (
            Notification.select()
            .where(Notification.state == "undeliverable")
            .order_by(Notification.id.desc())
            .first()
        )
        return {
            "sinks": sorted(self.sinks),
            # False until a quiet moment has made the read cursor durable (one write)
            "settled": self._saved == self.cursor,
            "off": dict(self.errors),
            "waiting": counts.get("held", 0) + counts.get("pending", 0),
            "sent": counts.get("sent", 0),
            "undeliverable": counts.get("undeliverable", 0),
            "last_undeliverable": None
            if bad is None
            else {"sink": bad.sink, "rule": bad.rule, "seq": bad.seq, "error": bad.error},
        }


def db_count():
    from peewee import fn

    return fn.COUNT(Notification.id)
