"""Test helpers for provider adapters (used by the claude and codex plugin tests)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def until(fn, timeout: float = 30.0, what: str = "condition"):
    """Poll ``fn`` until it returns something truthy (returned), else fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached in {timeout}s")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (ended, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def in_threads(fn, n: int) -> None:
    """Run ``fn`` in ``n`` threads at once and wait for all of them."""
    import threading

    threads = [threading.Thread(target=fn) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


CORPUS_HOW = (
    "set ORCR_SHARED to the shared/ folder that holds fixtures/transcripts "
    "(or put shared/ beside the repository)"
)


def corpus_dir(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The third-party transcript corpus, ``<shared>/fixtures/transcripts``, or None.

    ``$ORCR_SHARED`` names ``shared/``; when it is set the corpus must be there
    (FileNotFoundError otherwise: CI must not pass by running nothing). Else the
    first ``shared/`` holding it beside ``start``'s ancestors (this file's by
    default) is used: ``/work/main`` with ``/work/shared``, a CI clone with
    ``../shared``. The corpus has mixed licences and never enters the repository;
    the tests that read it are the ``conformance`` group.
    """
    env = os.environ.get("ORCR_SHARED")
    if env:
        corpus = Path(env) / "fixtures" / "transcripts"
        if not corpus.is_dir():
            raise FileNotFoundError(f"ORCR_SHARED={env} has no fixtures/transcripts folder")
        return corpus
    here = Path(start or __file__).resolve()
    for parent in here.parents:
        corpus = parent / "shared" / "fixtures" / "transcripts"
        if corpus.is_dir():
            return corpus
    return None


def transcript_fixtures(provider: str) -> Path:
    """One provider's folder of the corpus (conformance tests only)."""
    corpus = corpus_dir()
    if corpus is None:
        raise FileNotFoundError(f"no transcript corpus found: {CORPUS_HOW}")
    return corpus / provider


class FakeClock:
    """A monotonic clock a test advances by hand (readers take ``clock=``)."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Transcript:
    """A transcript file a test appends JSON records (or raw bytes) to."""

    def __init__(self, path: Path):
        self.path = path
        path.touch()

    def add(self, *records: dict) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record) + "\n")

    def raw(self, data: bytes) -> None:
        with self.path.open("ab") as fh:
            fh.write(data)


def feed_in_chunks(provider, data: bytes, cuts: list[int]) -> dict:
    """Append ``data`` to a fresh transcript in pieces cut at ``cuts``, polling one
    incremental reader after each piece, and return what it read in ``orcr provider
    parse`` shape. An adapter must read the same whether a file arrives whole or
    cut anywhere (mid-line included); only whole lines may ever be consumed."""
    import tempfile

    from orcr_core.kit.adapter_helpers import summary

    bounds = sorted({0, len(data), *cuts})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"")
        reader = provider.open_reader(str(path), settle=0.0, blocked_after=None)
        state = reader.poll()
        for start, end in zip(bounds, bounds[1:], strict=False):
            with path.open("ab") as fh:
                fh.write(data[start:end])
            state = reader.poll()
            assert reader.offset == 0 or data[reader.offset - 1 : reader.offset] == b"\n"
            assert reader.offset <= end
        return summary(provider.name, state)


def cuts_mid_line(data: bytes, into: int) -> list[int]:
    """Cuts ``into`` bytes into every line of ``data`` (for :func:`feed_in_chunks`)."""
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    return [s + into for s in starts if s + into < len(data)]


def quiet_copy(src: Path, dst: Path) -> Path:
    """Copy ``src`` to ``dst`` and date it a day back: a live reader's quiet and
    settle periods are long over, so it reads as a whole-file read would."""
    dst.write_bytes(src.read_bytes())
    day_ago = time.time() - 86400
    os.utime(dst, (day_ago, day_ago))
    return dst


def check_summary(result: dict, provider: str, truth: tuple) -> None:
    """``result`` (``orcr provider parse`` shape) against a fixture's ground truth
    ``(version, final state, [(status, the first 200 code points of the turn's final
    text or None, its full length or None for the length of those)])``."""
    version, state, turns = truth
    assert result["provider"] == provider
    assert result["version"] == version
    assert result["state"] == state
    assert [t["status"] for t in result["turns"]] == [t[0] for t in turns]
    for got, (_, head, length) in zip(result["turns"], turns, strict=True):
        if head is None:
            assert got["final_text"] is None
        else:
            assert got["final_text"][:200] == head
            assert len(got["final_text"]) == (length or len(head))


def read_until(fd: int, needle: bytes, seen: bytes = b"") -> bytes:
    """Read a PTY's master side until ``needle`` has appeared; everything read, after
    ``seen`` (fails with it if the terminal closes first)."""
    while needle not in seen:
        chunk = os.read(fd, 4096)
        assert chunk, seen
        seen += chunk
    return seen


def read_rest(fd: int) -> bytes:
    """What is left on a PTY's master side once its program has ended, and close it
    (the read fails once the last holder of the other side is gone)."""
    rest = b""
    try:
        while chunk := os.read(fd, 4096):
            rest += chunk
    except OSError:
        pass
    os.close(fd)
    return rest
