"""Incremental reading of an append-only JSONL transcript.

Part of the provider kit (docs/plugins/kit.md): provider-agnostic, used by the
claude, codex, gemini and pi plugins.

* :class:`JsonlTail` follows one file from a byte offset. Only complete lines
  (ended by ``\\n``) are parsed; the bytes after the last newline wait for the
  rest. A complete line that is not a JSON object is skipped. An unchanged
  file costs one ``os.stat``. A replaced file (new inode) or a truncated one
  (smaller than what was read) is re-read from the start and reported as a
  reset, so the caller rebuilds its state.
* :class:`JsonlTurnReader` glues a tail to a provider's record parser and
  measures how long the file has been quiet: from the file's mtime when it
  first reads the file (so a reader created after a server restart knows an
  old answer is settled, instead of flapping to "working" for a few seconds),
  then from the reader's own monotonic clock at each growth it sees.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from orcr_core.contracts import TurnState

_BLOCK = 1 << 20


@dataclass
class TailBatch:
    """What one :meth:`JsonlTail.read` found."""

    records: list[dict[str, Any]] = field(default_factory=list)
    grew: bool = False  # any new byte arrived (a partial line counts)
    reset: bool = False  # the file was replaced or truncated: start over
    mtime: float | None = None  # the file's st_mtime at this read (None: no file)


class JsonlTail:
    """Follows one JSONL file. ``offset`` is the start of the first unparsed line."""

    def __init__(self, path: str | os.PathLike[str], offset: int = 0):
        self.path = os.fspath(path)
        self._read_to = offset  # bytes consumed from the file, partial tail included
        self._partial = b""
        self._ident: tuple[int, int] | None = None

    @property
    def offset(self) -> int:
        """Byte offset just past the last complete line (safe to persist and resume from)."""
        return self._read_to - len(self._partial)

    def read(self) -> TailBatch:
        batch = TailBatch()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return batch  # not created yet, or briefly re-materialised: keep what we have
        batch.mtime = st.st_mtime
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and (ident != self._ident or st.st_size < self._read_to):
            self._read_to, self._partial, batch.reset, batch.grew = 0, b"", True, True
        self._ident = ident
        if st.st_size == self._read_to:
            return batch
        with open(self.path, "rb") as fh:
            fh.seek(self._read_to)
            while chunk := fh.read(_BLOCK):
                batch.grew = True
                self._read_to += len(chunk)
                self._take(self._partial + chunk, batch.records)
        return batch

    def _take(self, data: bytes, out: list[dict[str, Any]]) -> None:
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data
            return
        self._partial = data[cut + 1 :]
        for line in data[:cut].split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:  # a corrupt complete line: skip it, keep going
                continue
            if isinstance(record, dict):
                out.append(record)


class RecordParser(Protocol):
    """A provider's transcript state machine, fed one record at a time in file order."""

    def feed(self, record: dict[str, Any]) -> None: ...

    def state(self, quiet_for: float) -> TurnState: ...


class JsonlTurnReader:
    """A :class:`orcr_core.contracts.TranscriptReader` over a JSONL transcript."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        make_parser: Callable[[], RecordParser],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        self._tail = JsonlTail(path)
        self._make_parser = make_parser
        self._parser = make_parser()
        self._clock = clock
        self._wall = wall
        self._last_growth: float | None = None

    @property
    def offset(self) -> int:
        return self._tail.offset

    def poll(self) -> TurnState:
        batch = self._tail.read()
        if batch.reset:
            self._parser = self._make_parser()
        for record in batch.records:
            self._parser.feed(record)
        now = self._clock()
        if batch.grew:
            if self._last_growth is None and batch.mtime is not None:
                self._last_growth = now - max(0.0, self._wall() - batch.mtime)
            else:
                self._last_growth = now
        quiet_for = 0.0 if self._last_growth is None else now - self._last_growth
        return self._parser.state(quiet_for=quiet_for)
