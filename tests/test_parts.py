"""Parts, not mixins (issue 34 item 5): the tmux driver, the herdr driver and the herdr
emulator are each one class holding its parts as attributes, and a part sees only
what it is handed, so no state crosses files through a shared ``self``."""

from __future__ import annotations

from orcr_herdr.driver import HerdrDriver
from orcr_herdr.native import ResumeReports
from orcr_tasks.backend import Backend
from orcr_tasks.moves import Moves
from orcr_tasks.pg import PgQueue
from orcr_tasks.queue import Queue
from orcr_testing.herdr.emulator import Emulator
from orcr_testing.herdr.hooks import TestHooks
from orcr_testing.herdr.model import Pane
from orcr_testing.herdr.serving import Serving
from orcr_testing.herdr.session import SessionState
from orcr_tmux.driver import TmuxDriver
from orcr_tmux.prompt import Prompt
from orcr_tmux.server import TmuxServer
from orcr_tmux.snapshot import Panes

from orcr_core.loops.scheduler import Scheduler
from orcr_core.loops.stopping import Stopper
from orcr_core.server.app import Server
from orcr_core.server.multiplexer import Multiplexer


def test_no_stack_is_a_mixin_stack():
    """Planted: `class Emulator(TestHooks)` -> fails."""
    for cls in (TmuxDriver, HerdrDriver, Emulator, *(SessionState, Serving, TestHooks)):
        assert cls.__bases__ == (object,), cls


def test_the_server_scheduler_and_task_queues_hold_their_parts():
    """The server holds its multiplexer (``mux``), the scheduler its stop path
    (``stops``), each task backend the task's life (``moves``); the backends are
    Backends and nothing else. Planted: `class Scheduler(Stopper)` -> fails;
    `class Queue(Backend, Moves)` -> fails."""
    for cls in (Server, Scheduler, Multiplexer, Stopper, Moves):
        assert cls.__bases__ == (object,), cls
    assert Queue.__bases__ == (Backend,) and PgQueue.__bases__ == (Backend,)


def test_the_tmux_driver_shares_one_tmux_and_one_server_between_its_parts():
    """Planted: Panes given its own TmuxServer (the pid it sees never reaches the
    server part that tells a deleted socket from no server) -> fails."""
    d = TmuxDriver()
    assert isinstance(d._server, TmuxServer) and isinstance(d._prompt, Prompt)
    assert isinstance(d._panes, Panes) and d._panes.server is d._server
    assert d._server.tmux is d.tmux and d._prompt.tmux is d.tmux
    d.prompt_delay = 0.05  # the conformance fixtures set it on the driver
    assert d._prompt.delay == 0.05


def test_the_herdr_resume_part_reads_the_protocol_of_the_last_handshake(tmp_path):
    """Planted: ResumeReports given the protocol at construction (None) instead of a
    getter -> reports_resume stays False on herdr 0.9 -> fails."""

    class Config:
        data_dir = str(tmp_path)

        def get(self, key, default=None):
            return {"herdr.socket": str(tmp_path / "h.sock")}.get(key, default)

    d = HerdrDriver(Config())
    assert isinstance(d._resume, ResumeReports) and d._resume.client is d.client
    assert not d.reports_resume()
    d.protocol = 22  # what handshake() records
    assert d.reports_resume()
    d.protocol = 20
    assert not d.reports_resume()


def test_the_emulator_parts_see_its_live_settings_and_one_lock(tmp_path):
    """The emulator's public settings may change while it runs; its session part reads
    them through its host at each use. Planted: SessionState copying ``herdr_bin`` at
    construction -> the pane env keeps the old one -> fails."""
    emu = Emulator(tmp_path / "s.sock", tmp_path, protocol=22, strict=False)
    assert emu.state.host is emu and emu.serving.emu is emu
    assert emu.hooks.lock is emu.lock and emu.hooks.state is emu.state
    assert emu.workspaces is emu.state.workspaces and emu.requests is emu.serving.requests
    emu.herdr_bin = "/opt/herdr/bin/herdr"
    env = emu.state.pane_env(Pane("w1:p1", "w1", "w1:t1", 1, str(tmp_path)), None)
    assert env["HERDR_BIN_PATH"] == "/opt/herdr/bin/herdr"
    assert env["HERDR_SOCKET_PATH"] == str(tmp_path / "s.sock")
