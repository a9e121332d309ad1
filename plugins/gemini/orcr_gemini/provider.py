"""The Gemini CLI provider adapter.

Pinned to ``>=0.61,<0.62``: Gemini CLI 0.61.0 is the release the real_cli tier runs
and whose source (the npm package's bundle) docs/providers/gemini.md was written
from: its JSONL session records (``chats/session-*.jsonl``; earlier releases wrote
one JSON file rewritten whole, which this reader cannot follow), ``--session-id``
and ``--resume <id>``, the ``AfterAgent`` hook and ``GEMINI_CLI_SYSTEM_SETTINGS_PATH``.
Other releases need ``allow_unpinned`` until the tier has passed against them.

Gemini CLI's records carry no version, so the version checked is the installed
package's (the ``package.json`` its ``gemini`` bin links into, else ``gemini
--version``), found when orcr locates the session file.

orcr chooses the session id up front (``--session-id <agent uuid>``); the session
file is ``<GEMINI_CLI_HOME or ~>/.gemini/tmp/<project>/chats/session-<time>-<first 8
of the id>.jsonl``, created when Gemini CLI starts. ``<project>`` is a short name
Gemini CLI keeps in ``projects.json``, so orcr finds the file by a glob over every
project and the ``sessionId`` of its first line.
"""

from __future__ import annotations

import glob
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from orcr_core.contracts import InputState, LaunchSpec, ProviderError, ScreenState, SessionPointer
from orcr_core.kit.adapter_helpers import JsonlAdapter, base_argv, str_list
from orcr_core.kit.jsonl_tail import JsonlTail, JsonlTurnReader
from orcr_core.store.durable import fsync_dir
from orcr_gemini import screen, settings
from orcr_gemini.turns import GeminiTurns, history_loaded, iso_time


def _session_of(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            first = json.loads(fh.readline())
        return first.get("sessionId") if isinstance(first, dict) else None
    except (OSError, ValueError):
        return None


def _started(path: str | None) -> float | None:
    """The ``startTime`` of a session file's first line (the process that opened it),
    as a Unix time; None without one."""
    try:
        with open(path or "", encoding="utf-8", errors="replace") as fh:
            first = json.loads(fh.readline())
    except (OSError, ValueError):
        return None
    return iso_time(first.get("startTime")) if isinstance(first, dict) else None


def _history_loaded(path: str | None, since: float) -> bool:
    """Whether the session file shows a process started since ``since`` has loaded the
    history it resumes (:func:`orcr_gemini.turns.history_loaded`)."""
    return path is not None and history_loaded(JsonlTail(path).read().records, since)


def gemini_home(options: dict[str, Any]) -> Path:
    """The folder holding ``.gemini``: ``[providers.gemini] home``, else
    ``$GEMINI_CLI_HOME``, else the user's home."""
    root = options.get("home") or os.environ.get("GEMINI_CLI_HOME") or "~"
    return Path(os.path.expanduser(str(root)))


#: seconds a composer must show without a break, after a trust question, to be taken
#: as the restarted process's when its restart was not seen (:meth:`screen_state`)
STEADY = 15.0


class SessionReader:
    """A :class:`JsonlTurnReader` that follows its session into a new file: Gemini CLI
    restarts itself after the folder-trust question, deletes the file its first start
    made (no prompt in it) and starts the same session id in a file named by the new
    minute. When the file is gone, the newest ``session-*-<id8>.jsonl`` beside it whose
    first line names the same session is read from the start."""

    def __init__(self, path: str, make_parser, clocks: dict):
        self.path = path
        self._make = make_parser
        self._clocks = clocks
        self._reader = JsonlTurnReader(path, make_parser, **clocks)
        self._session = _session_of(path)

    def poll(self):
        if self._session and not os.path.exists(self.path):
            chats = os.path.dirname(self.path)
            pattern = os.path.join(
                glob.escape(chats), f"session-*-{glob.escape(self._session[:8])}.jsonl"
            )
            found = [p for p in glob.glob(pattern) if _session_of(p) == self._session]
            if found:
                self.path = max(found, key=os.path.getmtime)
                self._reader = JsonlTurnReader(self.path, self._make, **self._clocks)
        return self._reader.poll()


#: in the agent's data dir while it resumes: when its ``--resume`` argv was made. The
#: composer waits for the resumed process to load its history (:meth:`screen_state`);
#: a server restarted meanwhile re-matches the pane and its process, and must still
#: wait, so the mark outlives the server that made it. Removed once the history loaded.
RESUMING = "gemini-resuming.json"


def _mark_resuming(spec: LaunchSpec, since: float) -> None:
    """Write the mark whole or not at all (a temporary file, fsync'd, renamed, the
    folder fsync'd) before the resumed process starts. A folder that cannot take it
    (a full disk) leaves the in-memory mark only, as before."""
    folder = Path(spec.data_dir)
    tmp = folder / f".{RESUMING}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"since": since}))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / RESUMING)
        fsync_dir(folder)
    except OSError:
        tmp.unlink(missing_ok=True)


def _resuming_since(spec: LaunchSpec) -> float | None:
    """The mark's time, None without one (a garbled mark counts as none: it can only
    be a rename that never happened, and the rename is the write)."""
    try:
        since = json.loads((Path(spec.data_dir) / RESUMING).read_text())["since"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return float(since) if isinstance(since, int | float) else None


def _resumed(spec: LaunchSpec) -> None:
    try:
        (Path(spec.data_dir) / RESUMING).unlink(missing_ok=True)
    except OSError:
        pass


#: environment variables that make Gemini CLI headless (no TUI) when ``true``
HEADLESS_IN = ("CI", "GITHUB_ACTIONS")


class GeminiProvider(JsonlAdapter):
    name = "gemini"
    #: the sandbox (docs/sandbox.md): its model API, and the variables it may need
    sandbox_hosts = ("generativelanguage.googleapis.com",)
    sandbox_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_CLI_HOME")
    #: per-run options ``agent run --model/--arg`` take (over [providers.<name>])
    run_options = ("model", "args")
    supported_versions = ">=0.61,<0.62"
    #: the command run by default, and how to install it (``orcr doctor``)
    cli = ("gemini", "npm install -g @google/gemini-cli")
    has_transcript = True

    def __init__(self) -> None:
        #: what locate_transcript learnt for a session file: (version, hooked)
        self._facts: dict[str, tuple[str | None, bool]] = {}
        #: agent uuid -> when its restart line was first seen after its trust question
        #: showed (None: not yet)
        self._asked_trust: dict[str, float | None] = {}
        #: agent uuid -> since when its asked-about composer has shown without a break
        self._steady: dict[str, float] = {}
        #: agent uuid -> when its ``--resume`` argv was made, until the resumed process
        #: has loaded its history (:meth:`screen_state`)
        self._resuming: dict[str, float] = {}

    def _session(self, spec: LaunchSpec) -> str:
        try:
            return str(uuid.UUID(spec.uuid))
        except ValueError:
            raise ProviderError(
                f"gemini --session-id needs a UUID, got {spec.uuid!r}", code="bad_session_id"
            ) from None

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        """``argv`` + ``--session-id <uuid>`` + ``--model X`` + ``extra_args`` (no shell)."""
        return base_argv(self.name, spec.options, "gemini", ["--session-id", self._session(spec)],
                         "--model")  # fmt: skip

    def resume_argv(self, spec: LaunchSpec, pointer: SessionPointer) -> list[str]:
        """``argv`` + ``--resume <session id>`` + the rest: Gemini CLI loads that session
        and appends to its file (``.jsonl``: the same file)."""
        self._resuming[spec.uuid] = time.time()
        _mark_resuming(spec, self._resuming[spec.uuid])
        return base_argv(self.name, spec.options, "gemini", ["--resume", pointer.value], "--model")

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        return SessionPointer(source="orcr", kind="id", value=self._session(spec))

    def launch_env(self, spec: LaunchSpec) -> dict[str, str | None]:
        """``GEMINI_CLI_HOME`` from ``home``; ``GEMINI_CLI_SYSTEM_SETTINGS_PATH`` naming the
        agent's settings file with orcr's ``AfterAgent`` hook (:mod:`orcr_gemini.settings`),
        unless ``stop_hook = false`` or the file would not be loaded there.

        ``CI`` and ``GITHUB_ACTIONS`` are removed: with either ``true`` Gemini CLI runs
        headless whatever its terminal (``isHeadlessMode``), finds no prompt on stdin and
        exits 42, so orcr run from a CI job could start no Gemini agent at all."""
        env: dict[str, str | None] = dict.fromkeys(HEADLESS_IN)
        if spec.options.get("home"):
            env["GEMINI_CLI_HOME"] = str(spec.options["home"])
        if spec.options.get("settings_dir") is not None:
            settings.refuse_unparsable(spec.options["settings_dir"], "settings_dir")
        if spec.options.get("stop_hook", True):
            path = settings.write(spec, {})
            if path is not None:
                env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = str(path)
        return env

    def sandbox_read(self, spec: LaunchSpec) -> list[str]:
        """``settings_dir`` (orcr's system settings file with the turn-end hook):
        read-only; the default place, the agent's data dir, is bound already."""
        where = spec.options.get("settings_dir")
        return [os.path.expanduser(str(where))] if where else []

    def sandbox_paths(self, spec: LaunchSpec) -> list[str]:
        """``<home>/.gemini``: its settings and the session files (the transcripts)."""
        return [f"{gemini_home(spec.options) / '.gemini'}/"]

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        """``<home>/.gemini/tmp/*/chats/session-*-<id8>.jsonl`` whose first line names
        the session, the first made (:meth:`find_file`); None until it exists."""
        if pointer.kind == "path":
            found = pointer.value if os.path.isfile(pointer.value) else None
        else:
            found = self.find_file(gemini_home(spec.options), pointer.value, first=True)
        if found is not None:
            argv = str_list(spec.options.get("argv", ["gemini"]), "providers.gemini.argv")
            self._facts[found] = (settings.installed_version(argv[0]), settings.hooked(spec))
        return found

    @staticmethod
    def find_file(home: Path, session: str, first: bool = False) -> str | None:
        """The session's file last written to; with ``first``, the first one made
        (named by the earliest minute): the one holding the conversation. A resumed
        Gemini CLI appends to the session's file and opens one of its own beside it,
        with its context alone, which may be the one written last when orcr looks (a
        server restarted while the agent resumes): read, it never shows a turn."""
        chats = Path(glob.escape(str(home / ".gemini" / "tmp"))) / "*" / "chats"
        pattern = str(chats / f"session-*-{glob.escape(session[:8])}.jsonl")
        found = [p for p in glob.glob(pattern) if _session_of(p) == session]
        if not found:
            return None
        return min(found, key=os.path.basename) if first else max(found, key=os.path.getmtime)

    def open_reader(self, path: str, *, settle: float = 3.0, blocked_after=None, **clocks):
        """An incremental reader of the session file; turn ends by orcr's hook line when
        the agent runs with it, else after ``settle`` quiet seconds on an answer."""
        version, hooked = self._facts.get(path, (None, False))
        return SessionReader(
            path, lambda: GeminiTurns(settle=settle, hooked=hooked, version=version), clocks
        )

    def input_state(self, text: str) -> InputState:
        """The composer and a running turn, after a prompt's Enter (:mod:`orcr_gemini.screen`)."""
        return screen.input_state(text)

    def screen_state(self, text: str, spec: LaunchSpec) -> ScreenState:
        """Ready at its input, or a question first (:mod:`orcr_gemini.screen`).

        Gemini CLI draws its composer *before* it asks the folder-trust question (a
        prompt typed then answers the question: its Enter picks "Trust folder"). So the
        composer counts as ready only when Gemini CLI will not ask: the folder is
        trusted, or distrusted, by its own files (:func:`settings.trust_known`); else
        orcr waits for the question.

        After the question was answered "Trust folder" the process that asked redraws its
        composer without the question for a moment (tmux, fixture
        0.61.0-trust-answered-old-composer.txt) before it prints "Gemini CLI is restarting
        to apply the trust changes..." and relaunches (it flips between the two for a
        second or two, and opens its session file meanwhile); a prompt typed there is
        lost. So once this agent's trust question was seen, a composer is ready only when
        its session file was started after the restart line was first seen: by the
        restarted process.

        The restart line is read by polling, and can be missed (a restart quicker than
        a poll, a screen cleared by the restarted process) or seen late (after the
        restarted process opened its file). Waiting for it then hung the start until
        ``max_starting``. So a composer that has shown for :data:`STEADY` seconds without
        a break is taken as the restarted process's too: the asking process flips to
        its restart line within a second or two.

        A resumed agent (``--resume``) draws its composer before it has loaded the
        session it resumes, and a prompt typed then is lost: its composer is ready
        once its session file shows the history loaded by a process started since
        :meth:`resume_argv` (:func:`orcr_gemini.turns.history_loaded`). Until then the
        screen is unknown, which orcr types into anyway after ``READY_WAIT``. That
        mark is kept in the agent's data dir too (:data:`RESUMING`): a server restarted
        while the agent resumes still waits for the history."""
        state = screen.screen_state(text, spec)
        home = gemini_home(spec.options)
        if state.kind == "trust":
            self._asked_trust.setdefault(spec.uuid, None)
        elif screen.RESTART in text and self._asked_trust.get(spec.uuid, 0) is None:
            self._asked_trust[spec.uuid] = time.time()
        if state.state != "ready":
            self._steady.pop(spec.uuid, None)
            return state
        if not settings.trust_known(home, spec.cwd):
            return ScreenState("unknown")
        if spec.uuid in self._asked_trust:
            since = self._asked_trust[spec.uuid]
            started = _started(self.find_file(home, spec.uuid))
            steady = time.time() - self._steady.setdefault(spec.uuid, time.time())
            restarted = since is not None and started is not None and started > since
            if not restarted and steady < STEADY:
                return ScreenState("unknown")  # still the process that asked
            del self._asked_trust[spec.uuid]
            self._steady.pop(spec.uuid, None)
        since = self._resuming.get(spec.uuid)
        if since is None:
            since = _resuming_since(spec)  # marked by the server before a restart
        if since is not None:
            if not _history_loaded(self.find_file(home, spec.uuid), since):
                self._resuming[spec.uuid] = since
                return ScreenState("unknown")  # a prompt typed now would be lost
            self._resuming.pop(spec.uuid, None)
            _resumed(spec)
        return state

    def turns(self, settle: float, blocked_after: float | None) -> GeminiTurns:
        return GeminiTurns(settle=settle, hooked=False)


def summarize(path: str) -> dict[str, Any]:
    """One whole transcript as ``{"provider", "version", "state", "turns"}``."""
    return GeminiProvider().summarize(path)
