"""The provider adapter suite: one class every provider's tests subclass.

A provider package (bundled, ``orcr-pi`` or a third party's) runs it by subclassing
:class:`ProviderSuite` in one of its test modules and saying what it is::

    from orcr_testing.conformance import ProviderSuite

    class TestMyProvider(ProviderSuite):
        provider = MyProvider                      # a class or a factory
        fixtures = Path(__file__).parent / "fixtures"
        truth = {"two-turns.jsonl": ("1.2.0", "idle", [("completed", "Done.", 5)])}
        launch_options = {"argv": ["mycli"]}       # LaunchSpec.options for the argv tests

``truth`` is each transcript's ground truth: ``(version, final state, [(status, the
first 200 code points of the turn's final text or None, its full length or None)])``.
Every transcript in ``fixtures`` (``transcripts``, ``*.jsonl`` unless set) must have
one. What is checked: the adapter is a :class:`~orcr_core.contracts.Provider`; each
transcript read whole says its truth, and reads the same written in pieces (a JSONL
file cut anywhere, mid-line included: only whole lines are consumed; a transcript of
another kind, as OpenCode's database, says how with ``written`` and
``written_in_pieces``); the launch and resume argv are lists of strings; a version outside
the pinned range is refused naming the range, or warned about with
``allow_unpinned``; and (``screens``) what the screen fixtures show before the first
prompt. docs/plugins/conformance.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from orcr_core.contracts import LaunchSpec, Provider, ProviderError
from orcr_core.kit.adapter_helpers import summary
from orcr_core.kit.testing import cuts_mid_line, quiet_copy


class ProviderSuite:
    """The provider adapter contract; subclass it as ``Test<Name>`` (module docstring)."""

    #: the adapter: a class or a factory taking no arguments
    provider: ClassVar[Callable[[], Any] | None] = None
    #: the folder of transcript fixtures
    fixtures: ClassVar[Path | None] = None
    #: which files in ``fixtures`` are transcripts (a glob)
    transcripts: ClassVar[str] = "*.jsonl"
    #: file name -> ground truth (module docstring)
    truth: ClassVar[dict[str, tuple]] = {}
    #: ``LaunchSpec.options`` for the argv tests (``{"argv": [...]}`` where it needs one)
    launch_options: ClassVar[dict[str, Any]] = {}
    #: a version no pin of this adapter covers
    unsupported_version: ClassVar[str] = "0.0.1"
    #: screen fixture file (in ``fixtures/screens``) -> the ``state`` its
    #: ``screen_state`` says; empty when the adapter reads no screen
    screens: ClassVar[dict[str, str]] = {}

    def pytest_generate_tests(self, metafunc):
        if "transcript" in metafunc.fixturenames:
            names = sorted(self.truth)
            metafunc.parametrize("transcript", names, ids=names)
        if "screen" in metafunc.fixturenames:
            names = sorted(self.screens)
            metafunc.parametrize("screen", names, ids=names)

    def adapter(self):
        assert self.provider is not None, f"{type(self).__name__}: set `provider`"
        return self.provider()

    def spec(self, tmp_path: Path) -> LaunchSpec:
        # an agent's id is a UUID, as orcr gives it (Claude Code's --session-id is one)
        uid = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
        return LaunchSpec(uid, "suite/one", str(tmp_path), str(tmp_path / "data"), {
            **self.launch_options
        })  # fmt: skip

    def path(self, name: str) -> Path:
        assert self.fixtures is not None, f"{type(self).__name__}: set `fixtures`"
        return Path(self.fixtures) / name

    def test_is_a_provider(self):
        p = self.adapter()
        assert isinstance(p, Provider), f"{p!r} lacks a Provider method"
        assert isinstance(p.name, str) and p.name, "name: a non-empty string"
        assert isinstance(p.supported_versions, str)
        assert isinstance(p.has_transcript, bool)

    def written(self, fixture: Path, where: Path) -> str:
        """Write ``fixture`` into the folder ``where`` as the CLI wrote it, long ago, and
        return the path its reader opens. A JSONL transcript is copied; override this
        for a transcript that is not one appended file (OpenCode's database)."""
        return str(quiet_copy(fixture, where / fixture.name))

    def written_in_pieces(self, fixture: Path, where: Path, cut: int | None) -> Iterator[str]:
        """Write ``fixture`` into ``where`` piece by piece as the CLI would, yielding the
        path its reader opens before the first piece and again after each. A JSONL
        transcript is cut ``cut`` bytes into every line (``None``: one piece);
        override this with :meth:`written`."""
        path = where / fixture.name
        path.write_bytes(b"")
        yield str(path)
        raw = fixture.read_bytes()
        bounds = sorted({0, len(raw), *(cuts_mid_line(raw, cut) if cut else [])})
        for start, end in zip(bounds, bounds[1:], strict=False):
            with path.open("ab") as fh:
                fh.write(raw[start:end])
            yield str(path)

    def test_every_fixture_has_ground_truth(self):
        found = sorted(p.name for p in Path(self.path(".")).glob(self.transcripts))
        assert found == sorted(self.truth)

    def test_transcript_read_whole(self, transcript, tmp_path):
        """A transcript written long ago, read by a fresh reader: its ground truth (an
        unfinished turn stays open: a reader that guesses a quiet one blocked is told
        not to, ``blocked_after=None``)."""
        p = self.adapter()
        copy = self.written(self.path(transcript), tmp_path)
        try:
            reader = p.open_reader(copy, blocked_after=None)
        except TypeError:  # a reader that never guesses
            reader = p.open_reader(copy)
        result = summary(p.name, reader.poll())
        _check(result, p.name, self.truth[transcript])

    def test_transcript_cut_mid_line_reads_the_same(self, transcript, tmp_path):
        """Written in pieces (:meth:`written_in_pieces`: a JSONL transcript cut into
        every line), polled after each: only whole records are consumed, and the turns
        read as from the whole file."""
        p = self.adapter()
        fixture = self.path(transcript)
        whole = _fed(p, self.written_in_pieces(fixture, _fresh(tmp_path / "whole"), None))
        for cut in (1, 7):
            where = _fresh(tmp_path / f"cut{cut}")
            assert _fed(p, self.written_in_pieces(fixture, where, cut)) == whole
        _check(whole, p.name, self.truth[transcript])

    def test_launch_and_resume_argv_are_strings(self, tmp_path):
        p = self.adapter()
        spec = self.spec(tmp_path)
        argv = p.launch_argv(spec)
        assert isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv), argv
        pointer = p.launch_session(spec)
        resume = getattr(p, "resume_argv", None)
        if pointer is not None and resume is not None:
            again = resume(spec, pointer)
            assert isinstance(again, list) and all(isinstance(a, str) for a in again), again

    def test_a_version_outside_the_pin_is_refused_naming_the_range(self):
        p = self.adapter()
        if not p.supported_versions:
            pytest.skip(f"{p.name} pins no version range")
        with pytest.raises(ProviderError) as exc:
            p.check_version(self.unsupported_version, {})
        assert p.supported_versions in str(exc.value)
        warning = p.check_version(self.unsupported_version, {"allow_unpinned": True})
        assert isinstance(warning, str) and warning

    def test_screen_fixture(self, screen, tmp_path):
        p = self.adapter()
        text = (self.path("screens") / screen).read_text()
        assert p.screen_state(text, self.spec(tmp_path)).state == self.screens[screen]


def _fed(provider, pieces: Iterator[str]) -> dict:
    """One reader opened on the first path ``pieces`` yields and polled after each
    piece (:func:`orcr_core.kit.testing.feed_in_chunks` for any reader, not only the
    kit's: one that takes ``settle`` is told a turn end needs no quiet time)."""
    path = next(pieces)
    try:
        reader = provider.open_reader(path, settle=0.0, blocked_after=None)
    except TypeError:  # a reader with no settle period
        reader = provider.open_reader(path)
    state = reader.poll()
    for _ in pieces:
        state = reader.poll()
    return summary(provider.name, state)


def _fresh(where: Path) -> Path:
    where.mkdir(parents=True)
    return where


def _check(result: dict, provider: str, truth: tuple) -> None:
    """:func:`orcr_core.kit.testing.check_summary`, here so that pytest explains a
    difference (this module's assertions are rewritten, the kit's are not)."""
    version, state, turns = truth
    assert (result["provider"], result["version"], result["state"]) == (provider, version, state)
    assert [t["status"] for t in result["turns"]] == [t[0] for t in turns]
    for got, (_, head, length) in zip(result["turns"], turns, strict=True):
        if head is None:
            assert got["final_text"] is None
        else:
            assert got["final_text"][:200] == head
            assert len(got["final_text"]) == (length or len(head))
