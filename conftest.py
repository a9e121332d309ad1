"""Shared fixtures: a private ORCR_HOME, a real server process, the real CLI.

Every test that touches orcr state gets its own ``ORCR_HOME`` under a short
/tmp directory (AF_UNIX paths are limited to 107 bytes), so nothing reads or
writes the user's real config, store or socket.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from orcr_core.kit.testing import CORPUS_HOW, corpus_dir, until  # noqa: F401  (until: re-exported)

ROOT = Path(__file__).resolve().parent
TEST_PLUGINS = ROOT / "tests" / "plugins"
# tests/ holds importable helpers: fake_models (fake model APIs), real_cli.tier
sys.path.insert(0, str(ROOT / "tests"))
# testing/ is the test distribution orcr-testing (the herdr emulator), kept out of
# orcr's wheel: importable from the checkout whether or not it is installed
sys.path.append(str(ROOT / "testing"))

from _support.home import OrcrHome  # noqa: E402  (after the sys.path line above)
from _support.mux import Mux  # noqa: E402, F401  (Mux: imported by tests from here)

#: the suite's plumbing, a module a job (tests/_support)
pytest_plugins = ["_support.e2e"]

# The conformance group: tests marked ``conformance`` read the third-party transcript
# corpus, which stays outside the repository (mixed licences). They run whenever it
# is found; otherwise they are deselected and one summary line says why and how to
# run them. ``.ci/run`` sets ORCR_SHARED, so CI always runs them.
_CONFORMANCE = pytest.StashKey[tuple]()
# The real_cli tier: tests marked ``real_cli`` drive the real Claude Code and Codex
# CLIs (tests/real_cli). They run when the CLIs are found and the process is in a
# loopback-only network namespace; otherwise one summary line says why and how to run
# them (scripts/provider-smoke). ORCR_REAL_CLI=required (set by provider-smoke) makes
# a missing prerequisite an error instead.
_REAL_CLI = pytest.StashKey[tuple]()


#: pytest-xdist workers when none are asked for: the tests mostly wait (on servers,
#: panes, timers), so four workers on two cores take about a third of the serial time
WORKERS = 4

#: why each rerun was needed, printed at the end (pytest_runtest_logreport)
_RERUNS: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Run on :data:`WORKERS` workers unless ``-n``/``--dist`` say otherwise. Set here
    rather than in addopts, so that without pytest-xdist (``-p no:xdist``, an older
    environment) the suite runs serially instead of refusing an unknown ``-n``. A
    worker runs this hook too: it must stay a worker."""
    opt = config.option
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if opt.numprocesses is None and opt.dist == "no":
        opt.numprocesses, opt.dist = WORKERS, "worksteal"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "conformance: reads the third-party transcript corpus (shared/fixtures/transcripts); "
        "runs when it is found, else is reported as not run",
    )
    config.addinivalue_line(
        "markers",
        "herdr_08: a test using ``live`` that also runs on the herdr emulator as herdr 0.8 "
        "(socket protocol 20), not only as 0.9 (22): its path differs by herdr protocol",
    )
    config.addinivalue_line(
        "markers",
        "real_cli: drives the real provider CLIs (tests/real_cli); runs when they are "
        "installed and the network is loopback-only, else is reported as not run",
    )
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        # pytest-xdist's controller collects nothing (its workers do), so a usage error
        # found at collection would surface as a worker crash: find it here instead
        try:
            corpus_dir(ROOT)
        except FileNotFoundError as exc:
            raise pytest.UsageError(str(exc)) from None
        if os.environ.get("ORCR_REAL_CLI") == "required":
            from real_cli.tier import availability

            folder, why = availability()
            if folder is None:
                raise pytest.UsageError(f"real_cli tier required but cannot run: {why}")


def pytest_collection_modifyitems(config, items):
    try:
        corpus = corpus_dir(ROOT)
    except FileNotFoundError as exc:
        raise pytest.UsageError(str(exc)) from None
    group = [item for item in items if item.get_closest_marker("conformance")]
    if corpus is None and group:
        items[:] = [item for item in items if not item.get_closest_marker("conformance")]
        config.hook.pytest_deselected(items=group)
    config.stash[_CONFORMANCE] = (corpus, len(group))

    real = [item for item in items if item.get_closest_marker("real_cli")]
    if real:
        from real_cli.tier import availability

        folder, why = availability()
        if folder is None:
            if os.environ.get("ORCR_REAL_CLI") == "required":
                raise pytest.UsageError(f"real_cli tier required but cannot run: {why}")
            items[:] = [item for item in items if not item.get_closest_marker("real_cli")]
            config.hook.pytest_deselected(items=real)
        config.stash[_REAL_CLI] = (folder, why, len(real))
    if hasattr(config, "workeroutput"):
        # a pytest-xdist worker: only the controller prints the summary, and it collects
        # nothing itself, so each worker hands it what it found (plain str/int for execnet)
        corpus, count = config.stash[_CONFORMANCE]
        folder, why, count_real = config.stash.get(_REAL_CLI, (None, "", 0))
        config.workeroutput["orcr_groups"] = (
            corpus and str(corpus),
            count,
            folder and str(folder),
            why,
            count_real,
        )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: take the groups' counts from the first worker that
    collected (every worker collects the same tests)."""
    out = getattr(node, "workeroutput", {}).get("orcr_groups")
    if out is None or _CONFORMANCE in node.config.stash:
        return
    corpus, count, folder, why, count_real = out
    node.config.stash[_CONFORMANCE] = (corpus and Path(corpus), count)
    if count_real:
        node.config.stash[_REAL_CLI] = (folder and Path(folder), why, count_real)


def pytest_runtest_logreport(report):
    """Keep why each rerun was needed (pytest-rerunfailures' summary names the test
    only): a rerun is a flake to fix, and its reason is where to start."""
    if report.outcome == "rerun":
        _RERUNS.append(f"{report.nodeid} ({report.when}): {rerun_reason(report)}")


def rerun_reason(report) -> str:
    """The failure's whole error text: the exception's message, its lines joined by
    `` | `` (up to 8 lines, 2000 characters). Cut at 200 characters, an assertion
    that printed a row lost the row's ``error``, the very text that names the cause."""
    crash = getattr(report.longrepr, "reprcrash", None)
    why = crash.message if crash is not None else str(report.longrepr)
    lines = [line.strip() for line in why.splitlines() if line.strip()]
    text = " | ".join(lines[:8])[:2000]
    entries = getattr(getattr(report.longrepr, "reprtraceback", None), "reprentries", None)
    where = _test_line(entries or [], report.nodeid.split("::")[0])
    return f"at {where}: {text}" if where else text


def _test_line(entries, test_file: str) -> str:
    """The test's own line the failure came through (an 8-line message can be all
    screen dump, and which of a test's assertions failed is where to start)."""
    for entry in reversed(entries):
        fileloc = getattr(entry, "reprfileloc", None)
        loc, line = getattr(fileloc, "path", None), getattr(fileloc, "lineno", None)
        if loc and line and Path(loc).name == Path(test_file).name:
            return f"{Path(loc).name}:{line}"
    return ""


def pytest_terminal_summary(terminalreporter, config):
    for line in _RERUNS:
        terminalreporter.write_line(f"RERUN REASON {line}")
    folder, why, real = config.stash.get(_REAL_CLI, (None, "", 0))
    if real and folder is None:
        from real_cli.tier import HOW

        terminalreporter.write_line(f"real_cli: {real} tests NOT RUN: {why}; {HOW}")
    elif real:
        terminalreporter.write_line(f"real_cli: {real} tests selected, provider CLIs in {folder}")
    corpus, count = config.stash.get(_CONFORMANCE, (None, 0))
    if not count:
        return
    if corpus is None:
        terminalreporter.write_line(
            f"conformance: {count} tests NOT RUN: no transcript corpus found; {CORPUS_HOW}, "
            "e.g. ORCR_SHARED=/path/to/shared python -m pytest -m conformance"
        )
    else:
        terminalreporter.write_line(f"conformance: {count} tests selected, corpus {corpus}")


@pytest.fixture
def short_tmp():
    d = Path(tempfile.mkdtemp(prefix="orcr-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


#: zones far from UTC on both sides, each with DST: a day that starts at UTC midnight
#: instead of local midnight is off by 11-13 h in one and 7-8 h in the other
LOCAL_ZONES = ("Pacific/Auckland", "America/Los_Angeles")


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
def orcr_home(short_tmp, monkeypatch):
    """A private ORCR_HOME using the test driver; the server is started by the test."""
    home = short_tmp / "h"
    home.mkdir()
    env = dict(os.environ)
    env.update(
        ORCR_HOME=str(home),
        ORCR_PLUGIN_MODULES="orcr_test_driver",
        PYTHONPATH=os.pathsep.join(filter(None, [str(TEST_PLUGINS), env.get("PYTHONPATH")])),
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
    h = OrcrHome(home, env)
    h.config('[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\n')
    yield h
    h.stop_server()
    h.kill_server()
    h.reap()
    _drop_ceiling_groups()


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


#: ``live``'s multiplexers: tmux, the herdr emulator as herdr 0.9.3 (protocol 22) and,
#: for tests marked ``herdr_08``, as herdr 0.8 (protocol 20)
LIVE_MUXES = {"tmux": ("tmux", None), "herdr": ("herdr", 22), "herdr08": ("herdr", 20)}


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
    h = OrcrHome(home, dict(live.env, ORCR_HOME=str(home)))
    h.mux = live.mux
    h.config(live.mux.config() + '[timings]\npoll_every = "50ms"\n')
    yield h
    h.stop_server()
    h.kill_server()
    h.reap()
