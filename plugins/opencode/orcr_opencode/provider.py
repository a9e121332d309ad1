"""The OpenCode (``opencode-ai``) provider adapter.

OpenCode keeps its sessions in a SQLite database (:mod:`orcr_opencode.store`).
orcr gives each agent a database of its own (``OPENCODE_DB=<agent data
dir>/opencode.db``, an absolute path OpenCode uses as it is), so the agent's
session is the one session in it: the pointer is that path, known before the CLI
starts (``kind="path"``), and ``agent resume`` reopens the session found in it
(``--session <id>``). The transcript path orcr watches is the database's WAL
file, where every write lands while OpenCode runs.

Pinned to ``==1.18.*``: the real OpenCode 1.18.33 passed the real_cli tier
(docs/providers/opencode.md); the store's tables and the message shapes read here
are those of 1.18.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from orcr_core.contracts import (
    InputState,
    LaunchSpec,
    ProviderError,
    ScreenState,
    SessionPointer,
    TurnState,
)
from orcr_core.kit.adapter_helpers import base_argv, str_list, summary
from orcr_core.kit.versions import check_version
from orcr_opencode import screen
from orcr_opencode.store import StoreReader, db_path, main_session

DB_NAME = "opencode.db"


class OpenCodeProvider:
    name = "opencode"
    #: the sandbox (docs/sandbox.md): the variables it may need (its model API depends on
    #: the model: add the host to [sandbox.opencode] allow_net)
    sandbox_hosts: tuple[str, ...] = ()
    sandbox_env = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENCODE_CONFIG")
    #: per-run options ``agent run --model/--arg`` take (over [providers.<name>])
    run_options = ("model", "args")
    supported_versions = "==1.18.*"
    #: the command run by default, and how to install it (``orcr doctor``)
    cli = ("opencode", "npm install -g opencode-ai")
    has_transcript = True

    def db(self, spec: LaunchSpec) -> str:
        return os.path.join(os.path.abspath(spec.data_dir), DB_NAME)

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        """``argv`` (default ``["opencode"]``) + ``--model provider/model`` +
        ``extra_args``; OpenCode opens the pane's working folder as its project."""
        return base_argv(self.name, spec.options, "opencode", [], "--model")

    def resume_argv(self, spec: LaunchSpec, pointer: SessionPointer) -> list[str]:
        """The launch argv + ``--session <id>`` (the session in the agent's database),
        or ``--continue`` (its last session) when the database names none."""
        argv = self.launch_argv(spec)
        session = None
        path = db_path(pointer.value) if pointer.kind == "path" else self.db(spec)
        if os.path.isfile(path):
            try:
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2.0)
                try:
                    found = main_session(conn)
                finally:
                    conn.close()
                session = found[0] if found else None
            except sqlite3.Error:
                session = None
        return [*argv, "--session", session] if session else [*argv, "--continue"]

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        return SessionPointer(source="orcr", kind="path", value=self.db(spec))

    def launch_env(self, spec: LaunchSpec) -> dict[str, str | None]:
        """``OPENCODE_DB`` (the agent's own database); ``OPENCODE_DISABLE_AUTOUPDATE=1``
        unless ``[providers.opencode] autoupdate = true`` (an agent must stay on the
        version its adapter checked); ``config`` names an ``opencode.json``
        (``OPENCODE_CONFIG``)."""
        env: dict[str, str | None] = {"OPENCODE_DB": self.db(spec)}
        if not spec.options.get("autoupdate", False):
            env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
        config = spec.options.get("config")
        if config:
            if not isinstance(config, str):
                raise ProviderError(
                    f"providers.opencode.config = {config!r} is not allowed; "
                    "use the path of an opencode.json",
                    code="bad_provider_option",
                )
            env["OPENCODE_CONFIG"] = os.path.expanduser(config)
        str_list(spec.options.get("extra_args", []), "providers.opencode.extra_args")
        return env

    def sandbox_read(self, spec: LaunchSpec) -> list[str]:
        """The ``opencode.json`` ``config`` names (``OPENCODE_CONFIG``): read-only, or a
        sandbox that hides where it lives leaves OpenCode on its default model."""
        config = spec.options.get("config")
        return [os.path.expanduser(config)] if isinstance(config, str) and config else []

    def sandbox_paths(self, spec: LaunchSpec) -> list[str]:
        """Its data and cache folders (auth, caches); the database orcr reads lives in the
        agent's data dir, which every sandboxed agent writes."""
        return [
            os.path.expanduser("~/.local/share/opencode/"),
            os.path.expanduser("~/.cache/opencode/"),
            os.path.expanduser("~/.config/opencode/"),
        ]

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        """The WAL file of the agent's database while it exists (OpenCode running:
        every write lands there), else the database; None before OpenCode made it."""
        path = db_path(pointer.value) if pointer.kind == "path" else self.db(spec)
        if os.path.isfile(path + "-wal"):
            return path + "-wal"
        return path if os.path.isfile(path) else None

    def open_reader(self, path: str, **_: Any) -> StoreReader:
        return StoreReader(path)

    def check_version(self, version: str | None, options: dict[str, Any]) -> str | None:
        return check_version(self.name, self.supported_versions, version, options)

    def input_state(self, text: str) -> InputState:
        """The composer and a running turn, after a prompt's Enter (:mod:`orcr_opencode.screen`)."""
        return screen.input_state(text)

    def screen_state(self, text: str, spec: LaunchSpec) -> ScreenState:
        """Ready at its input, or a question (:mod:`orcr_opencode.screen`)."""
        return screen.screen_state(text, spec)

    def usage_limit(self, error: str) -> ScreenState | None:
        """A turn that ended on a usage limit (OpenCode gives up retrying a spent quota):
        it holds opencode's queue (orcr_core/usage_limits)."""
        return screen.usage_limit(error)

    def summarize(self, path: str) -> dict[str, Any]:
        """One whole database as ``{"provider", "version", "state", "turns"}``."""
        if not os.path.isfile(db_path(path)):
            raise ProviderError(f"no OpenCode database at {path}", code="transcript_unreadable")
        state: TurnState = StoreReader(path).poll()
        return summary(self.name, state)


def summarize(path: str) -> dict[str, Any]:
    return OpenCodeProvider().summarize(path)
