"""orcr's own test hooks: xdist defaults, the conformance and real_cli groups, rerun
reasons. The fixtures (a private ORCR_HOME, a real server process, the real CLI, the
multiplexers) come from orcr's pytest plugin, ``orcr_testing.plugin`` (testing/).

Every test that touches orcr state gets its own ``ORCR_HOME`` under a short
/tmp directory (AF_UNIX paths are limited to 107 bytes), so nothing reads or
writes the user's real config, store or socket.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from orcr_core.kit.testing import CORPUS_HOW, corpus_dir, until  # noqa: F401  (until: re-exported)

ROOT = Path(__file__).resolve().parent
TEST_PLUGINS = ROOT / "tests" / "plugins"
# tests/ holds importable helpers: fake_models (fake model APIs), real_cli.tier
sys.path.insert(0, str(ROOT / "tests"))
# testing/ is the test distribution orcr-testing (the herdr emulator, orcr's pytest
# plugin with the home, server and multiplexer fixtures, the conformance suites), kept
# out of orcr's wheel: importable from the checkout whether or not it is installed;
# its plugins/ folder holds the echo test driver (``import orcr_test_driver``)
sys.path.append(str(ROOT / "testing"))
sys.path.append(str(ROOT / "testing" / "orcr_testing" / "plugins"))

from orcr_testing.home import OrcrHome  # noqa: E402, F401  (after the sys.path lines above)
from orcr_testing.mux import Mux  # noqa: E402, F401  (Mux: imported by tests from here)

#: the suite's plumbing, a module a job (tests/_support); orcr's pytest plugin, by the
#: name of its ``pytest11`` entry point, so an installed orcr-testing is not loaded twice
pytest_plugins = [
    "_support.bytecode",
    "_support.e2e",
    "_support.clock",
    "_support.inproc",
    "orcr_testing.plugin",
]

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
#: panes, timers), so six workers keep two cores busy (docs/internals.md, "Running the
#: tests": 12m14s at six, 14m51s at four, on the same commit)
WORKERS = 6

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
def orcr_plugin_paths() -> list[Path]:
    """orcr's own test plugins (tests/plugins: orcr_test_broken, orcr_test_memory) on
    the PYTHONPATH of ``orcr_home``'s processes, beside the plugin's echo driver."""
    return [TEST_PLUGINS]
