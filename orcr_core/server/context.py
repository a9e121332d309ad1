"""What the code handed the server sees of it: the ``ServerContext`` Protocol.

Pipelines, the monitor's steps, the request handlers, the loop scheduler and the
notifier are all given the running :class:`orcr_core.server.app.Server` as
``server``. They are written against this Protocol, not against the class: it
names what they may use (the driver, the config in force, the registry, the
pipeline pool, the buses, the parts), so a reader sees the contract in one place
and a test may hand them anything that has the members a function touches (a
``SimpleNamespace`` with a ``driver`` and a ``config``). mypy checks that
``Server`` satisfies it (``_conforms`` below; ``[tool.mypy]`` in pyproject.toml).

A leaf: it imports the types it names only for the type checker, so any module
may import it without an import circle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from orcr_core.agents.memory import Ledger
    from orcr_core.agents.monitor import Monitor
    from orcr_core.config import Config
    from orcr_core.contracts import Driver
    from orcr_core.loops.scheduler import Scheduler
    from orcr_core.notify.outbox import Notifier
    from orcr_core.pm.plugins import Registry
    from orcr_core.server.agent_sockets import AgentSockets
    from orcr_core.server.app import Server
    from orcr_core.server.multiplexer import Multiplexer
    from orcr_core.store.events import Bus
    from orcr_core.usage_limits import Limits


class ServerContext(Protocol):
    """The running server as the code it is handed to sees it."""

    # -- configuration and plugins ----------------------------------------
    #: the configuration in force (a reload replaces it; read it each time)
    config: Config
    #: an edit of the config file that was not applied: {"error", "since"}
    config_error: dict | None
    #: drivers, providers and sinks by name, with the plugin that registered each
    registry: Registry

    # -- where things are -------------------------------------------------
    store_path: Path
    agents_dir: Path
    socket_path: Path

    # -- the multiplexer ----------------------------------------------------
    #: the driver, whether it answers, its event stream (server/multiplexer.py)
    mux: Multiplexer

    @property
    def driver(self) -> Driver | None:
        """The multiplexer driver, made on first use (None when none can run)."""
        ...

    # -- the parts ------------------------------------------------------------
    monitor: Monitor
    memory: Ledger
    usage_limits: Limits
    agent_sockets: AgentSockets
    #: the loop scheduler, None until ``serve`` made it
    loops: Scheduler | None
    #: notifications, None until ``serve`` made it
    notifier: Notifier | None

    # -- what the monitor and the pipelines share ----------------------------
    #: pane id -> when the multiplexer said its process exited
    exited_panes: dict[str, float]
    #: agent uuid -> when it was first seen lost
    lost_at: dict[str, float]
    #: blocked agents: when their screen was last re-checked (monotonic)
    dialog_checked: dict[str, float]
    #: why promotion waits (multiplexer, memory), for status/get
    held: str | None
    #: agent uuid -> its transcript reader (agents/transcripts.py)
    transcript_readers: dict
    #: each notification sink's last ``notify test`` result (server/notify_handlers.py)
    notify_tests: dict[str, dict]

    # -- buses and lifetime ---------------------------------------------------
    bus: Bus  # event rows, for watchers
    queue_bus: Bus  # work for the queue worker
    stopping: threading.Event
    started_at: float
    #: why serve() stopped other than on request
    failure: str | None
    #: the store file is damaged (store/health.py)
    store_broken: str | None

    def notify(self, queue: bool = True) -> None:
        """Wake watchers, and the queue worker unless ``queue`` is False."""
        ...

    def start_pipeline(
        self, uuid: str, fn: Callable[..., Any], *args: Any, queue_behind: bool = False
    ) -> None:
        """Run ``fn(server, uuid, *args)`` on the pool, one job per agent at a time."""
        ...

    def pipeline_active(self, uuid: str) -> bool: ...

    def store_error(self, exc: BaseException) -> bool:
        """True (and the server stops) when ``exc`` says the store file is damaged."""
        ...

    def reload_config(self, source: str = "reload") -> dict[str, list]: ...

    def status(self) -> dict: ...

    def started_threads(self) -> bool: ...

    def stop(self) -> None: ...


if TYPE_CHECKING:

    def _conforms(server: Server) -> ServerContext:
        return server  # mypy: the Server class satisfies the Protocol
