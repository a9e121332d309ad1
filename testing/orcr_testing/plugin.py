"""orcr's pytest plugin (the ``pytest11`` entry point ``orcr_testing.plugin``).

Installed with orcr-testing, pytest loads it in any project, as datasette's and
tox's plugins are loaded: a third party's provider, driver or task backend package
gets the fixtures below and runs the conformance suites (:mod:`orcr_testing.
conformance`) against its own implementation (docs/plugins/conformance.md). orcr's
own tests load it the same way (the root ``conftest.py`` names it, for a checkout
where orcr-testing is not installed).

Fixtures:

* ``short_tmp``: a fresh folder under /tmp (AF_UNIX paths are limited to 107 bytes).
* ``orcr_home``: a private ``ORCR_HOME`` (:class:`~orcr_testing.home.OrcrHome`) on the
  echo test driver (``orcr_testing/plugins/orcr_test_driver.py``); the server is
  started by the test. ``orcr_plugin_paths`` (override it) adds folders to the
  ``PYTHONPATH`` its processes get, for a project's own test plugins. Its teardown
  kills what the test left running under the home (``OrcrHome.reap``).
* ``server``: ``orcr_home`` with its server running.
* ``live``: ``orcr_home`` on a real multiplexer, parametrised: tmux and the herdr
  emulator as herdr 0.9.3; tests marked ``herdr_08`` also as herdr 0.8.
* ``twin``: a second orcr instance on ``live``'s multiplexer.
* ``local_zone``: the test process in a zone far from UTC (two, each with DST).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

# the suites' assertions explained as in a test module, however the plugin was loaded
# (an entry point's package is rewritten by pytest; a conftest's pytest_plugins is not)
pytest.register_assert_rewrite("orcr_testing.conformance")

from orcr_testing import procgroup  # noqa: E402
from orcr_testing.home import OrcrHome  # noqa: E402
from orcr_testing.mux import Mux  # noqa: E402

#: the folder of the echo test driver's module (``orcr_test_driver``), put on the
#: ``PYTHONPATH`` of an ``orcr_home``'s processes
TEST_PLUGINS = Path(__file__).resolve().parent / "plugins"

#: zones far from UTC on both sides, each with DST: a day that starts at UTC midnight
#: instead of local midnight is off by 11-13 h in one and 7-8 h in the other
LOCAL_ZONES = ("Pacific/Auckland", "America/Los_Angeles")

#: ``live``'s multiplexers: tmux, the herdr emulator as herdr 0.9.3 (protocol 22) and,
#: for tests marked ``herdr_08``, as herdr 0.8 (protocol 20)
LIVE_MUXES = {"tmux": ("tmux", None), "herdr": ("herdr", 22), "herdr08": ("herdr", 20)}


def pytest_sessionfinish(session):
    procgroup.sweep()  # the tests' empty freezer groups a process kept until now


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "herdr_08: a test using ``live`` that also runs on the herdr emulator as herdr 0.8 "
        "(socket protocol 20), not only as 0.9 (22): its path differs by herdr protocol",
    )


@pytest.fixture
def short_tmp():
    d = Path(tempfile.mkdtemp(prefix="orcr-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=LOCAL_ZONES)
def local_zone(request):
    """The test process in a non-UTC zone (``$TZ`` and ``time.tzset``), restored after.
    Every test process otherwise runs in UTC, where local midnight is UTC midnight and
    a window or a date computed in the wrong zone passes unnoticed. An ``orcr_home``
    copies the environment when it is made: set ``home.env["TZ"]`` for its processes."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    yield request.param
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture
def orcr_plugin_paths() -> list[Path]:
    """Folders of a project's own test plugins, for ``ORCR_PLUGIN_MODULES``: added to
    the ``PYTHONPATH`` of ``orcr_home``'s processes. Override it in a conftest."""
    return []


@pytest.fixture
def orcr_home(short_tmp, monkeypatch, orcr_plugin_paths):
    """A private ORCR_HOME using the test driver; the server is started by the test.
    As root on a machine with a cgroup v1 freezer hierarchy the test process moves into
    a freezer group of its own for the test (orcr_testing.procgroup), where teardown's
    ``reap`` finds what the test left running; elsewhere ``reap`` walks ``/proc``."""
    home = short_tmp / "h"
    home.mkdir()
    env = dict(os.environ)
    paths = [str(TEST_PLUGINS), *map(str, orcr_plugin_paths), env.get("PYTHONPATH")]
    env.update(
        ORCR_HOME=str(home),
        ORCR_PLUGIN_MODULES="orcr_test_driver",
        PYTHONPATH=os.pathsep.join(filter(None, paths)),
    )
    for var in (
        "ORCR_PATH",
        "ORCR_SOCKET",
        "ORCR_FAULT",
        "ORCR_LOAD_PLUGINS",
        "TMUX",
        "HERDR_SOCKET_PATH",
    ):
        env.pop(var, None)
    monkeypatch.setenv("ORCR_HOME", str(home))
    monkeypatch.delenv("ORCR_PATH", raising=False)
    monkeypatch.delenv("ORCR_SOCKET", raising=False)
    group = procgroup.enter()  # from here on, what the test starts is in its group
    h = OrcrHome(home, env, group)
    h.config('[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\n')
    yield h
    try:
        h.stop_server()
        h.kill_server()
        h.reap()
        _drop_ceiling_groups()
    finally:
        if group is not None:
            group.leave()


def _drop_ceiling_groups() -> None:
    """The test's orcr instance is gone for good: its ceiling groups go too (a
    server that stopped leaves its live agents' groups, as it leaves the agents)."""
    from orcr_core import dirs
    from orcr_core.ceilings import v1

    if v1.unusable() is None:
        v1.CgroupV1(dirs.instance_id()).drop_all()


@pytest.fixture
def server(orcr_home):
    orcr_home.start_server()
    return orcr_home


def pytest_generate_tests(metafunc):
    """Parametrise ``live`` (asked for directly or through ``twin``): every test runs
    on tmux and on herdr 0.9; the tests marked ``herdr_08`` (those whose path differs
    by herdr protocol) on herdr 0.8 as well. The 0.8 leg is kept to them because
    doubling every emulator test would cost minutes of CI (docs/internals.md)."""
    if "live" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        if "live" in mark.args[0]:
            return  # the test names its legs itself
    legs = ["tmux", "herdr"]
    if metafunc.definition.get_closest_marker("herdr_08"):
        legs.append("herdr08")
    metafunc.parametrize("live", legs, indirect=True)


@pytest.fixture
def live(request, orcr_home, short_tmp):
    """orcr on a real multiplexer (tmux) or the schema-checked herdr emulator, with echo agents."""
    kind, protocol = LIVE_MUXES[request.param]
    mux = Mux(kind, short_tmp, protocol)
    orcr_home.mux = mux
    # herdr's config dir (its sessions) is the test's own: never the user's sessions
    orcr_home.env["XDG_CONFIG_HOME"] = str(short_tmp / "xdg")
    orcr_home.config(mux.config() + '[timings]\npoll_every = "50ms"\n')
    yield orcr_home
    orcr_home.stop_server()
    orcr_home.kill_server()
    mux.close()
    orcr_home.reap()


@pytest.fixture
def twin(live, short_tmp):
    """A second orcr instance (its own ORCR_HOME) on the same multiplexer server as ``live``
    (the socket is set explicitly in both configs, so they share it on purpose)."""
    home = short_tmp / "h2"
    home.mkdir()
    h = OrcrHome(home, dict(live.env, ORCR_HOME=str(home)), live.group)
    h.mux = live.mux
    h.config(live.mux.config() + '[timings]\npoll_every = "50ms"\n')
    yield h
    h.stop_server()
    h.kill_server()
    h.reap()
