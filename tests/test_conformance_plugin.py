"""A third party's provider package runs the provider suite through orcr's pytest plugin
(issue 34 item 3; docs/plugins/conformance.md).

The package is the documented example provider (docs/plugins/example) in a folder
of its own, with its own pyproject.toml and ``orcr`` entry point, a transcript
fixture and one test module that subclasses ``ProviderSuite``. It and orcr-testing
(``testing/``) are installed with pip into a private folder, so pytest, started in
the package's folder with only that folder on ``PYTHONPATH``, loads the plugin
through its ``pytest11`` entry point, as it would for a user, not through orcr's
conftest. Then the package's adapter is given a bug, and the suite fails it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "plugins" / "example" / "orcr_example_provider.py"

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "orcr-upper"
version = "1.0.0"
dependencies = ["orcr"]

[project.entry-points.orcr]
upper = "orcr_example_provider"

[tool.setuptools]
py-modules = ["orcr_example_provider"]
"""

SUITE = """\
from pathlib import Path

import orcr_example_provider as upper
from orcr_testing.conformance import ProviderSuite


class TestUpper(ProviderSuite):
    provider = upper.UpperProvider
    fixtures = Path(__file__).parent / "fixtures"
    truth = {
        "two-turns.jsonl": ("1.0.0", "idle", [("completed", "HELLO", 5), ("completed", "ONCE MORE", 9)])
    }
    unsupported_version = "2.5.0"


def test_the_plugins_fixtures_are_here(orcr_home, short_tmp):
    assert orcr_home.path.is_dir() and short_tmp.is_dir()
"""

TRANSCRIPT = (
    '{"type": "start", "ts": 1.0, "version": "1.0.0"}\n'
    '{"type": "prompt", "ts": 2.0, "text": "hello"}\n'
    '{"type": "answer", "ts": 3.0, "text": "HELLO"}\n'
    '{"type": "prompt", "ts": 4.0, "text": "once more"}\n'
    '{"type": "answer", "ts": 5.0, "text": "ONCE MORE"}\n'
)


def _package(tmp: Path) -> Path:
    pkg = tmp / "orcr-upper"
    (pkg / "tests" / "fixtures").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    shutil.copy(EXAMPLE, pkg / "orcr_example_provider.py")
    (pkg / "tests" / "test_upper_conformance.py").write_text(SUITE)
    (pkg / "tests" / "fixtures" / "two-turns.jsonl").write_text(TRANSCRIPT)
    return pkg


def _install(tmp: Path, *sources: Path) -> Path:
    """pip-install ``sources`` (copies: a build writes build/ beside the sources) into
    a folder of their own, offline when the installed setuptools can build them."""
    site = tmp / "site"
    flags = ["--no-build-isolation"] if _can_build() else []
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *flags, "--target"]
        + [str(site), *map(str, sources)],
        check=True,
        capture_output=True,
    )
    return site


def _can_build() -> bool:
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def _pytest(pkg: Path, site: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ORCR_"))}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        # -P: the installed package, not its source folder (the working directory)
        [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + ["-p", "no:rerunfailures", "-rf", "tests"],
        cwd=pkg,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_third_party_provider_runs_the_suite_and_a_planted_bug_fails_it(tmp_path):
    """Planted: the example adapter lower-cases its answers -> the two transcript
    tests fail (read whole, cut mid-line); the rest pass."""
    testing = shutil.copytree(
        ROOT / "testing", tmp_path / "testing", ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    pkg = _package(tmp_path)
    site = _install(tmp_path, testing, pkg)
    assert (site / "orcr_testing" / "plugins" / "orcr_test_driver.py").exists()

    good = _pytest(pkg, site)
    assert good.returncode == 0, good.stdout + good.stderr
    # the suite's tests ran against the package's adapter, the plugin's fixtures too
    assert "7 passed" in good.stdout and "1 skipped" in good.stdout, good.stdout

    module = site / "orcr_example_provider.py"
    text = module.read_text()
    bug = 'final_text=record.get("text", "").lower()'
    module.write_text(text.replace('final_text=record.get("text", "")', bug))
    assert bug in module.read_text()
    bad = _pytest(pkg, site)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    failed = sorted(
        line.split("::")[-1].split(" ")[0] for line in bad.stdout.splitlines()
        if line.startswith("FAILED")
    )  # fmt: skip
    assert failed == [
        "test_transcript_cut_mid_line_reads_the_same[two-turns.jsonl]",
        "test_transcript_read_whole[two-turns.jsonl]",
    ], bad.stdout
