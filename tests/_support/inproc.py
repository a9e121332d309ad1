"""The ``server_in_process`` fixture: a real :class:`~orcr_core.server.app.Server` in
the test process, not serving (no socket, no threads of its own): its monitor, timer
heap, notifier, SQLite store, registry and the test driver (``orcr_testing/plugins``)
on ``short_tmp``'s home. A test drives the parts itself (``server.monitor.step``,
``Notifier(server).start()``), so a timer or a quiet window is a call, not a server
process and a CLI per assertion. Its config is ``SERVER_CONFIG`` unless the test
writes ``config.toml`` in ``server_home`` first.
"""

from __future__ import annotations

import pytest

SERVER_CONFIG = '[driver]\nname = "test"\n[timings]\npoll_every = "1h"\nreconcile_every = "1h"\n'


@pytest.fixture
def server_home(short_tmp, monkeypatch):
    """``ORCR_HOME`` of the test process, on the test driver."""
    from orcr_testing.plugin import TEST_PLUGINS  # after pytest loaded it (assert rewriting)

    monkeypatch.setenv("ORCR_HOME", str(short_tmp))
    monkeypatch.setenv("ORCR_PLUGIN_MODULES", "orcr_test_driver")
    monkeypatch.syspath_prepend(str(TEST_PLUGINS))
    return short_tmp


@pytest.fixture
def server_in_process(server_home):
    from orcr_core import dirs
    from orcr_core.server.app import Server
    from orcr_core.store import db as store_db

    if not (server_home / "config.toml").exists():
        (server_home / "config.toml").write_text(SERVER_CONFIG)
    server = Server()
    store_db.open_store(dirs.store_path())
    yield server
    server.stopping.set()
    server.pool.shutdown(wait=False, cancel_futures=True)
    store_db.close_store()
