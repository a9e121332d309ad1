"""orcr's wheel carries no test code (issue 34 item 6).

The herdr emulator, herdr's vendored schema and the throwaway PostgreSQL live in the
test distribution orcr-testing (``testing/``); no user-facing command needs them
(``scripts/herdr-compat``, a maintainer's script run from a checkout, reads the
vendored schema from ``testing/``). The wheel is built from a copy of the sources
(a build in the checkout would write ``build/`` beside a concurrent one), without
build isolation when the installed setuptools can build it, so nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: test code kept in the wheel on purpose, each with why: the provider kit's test
#: helpers (``until``, the transcript corpus lookup) are public surface for a
#: third party's provider tests (docs/plugins/kit.md)
ALLOWED = {"orcr_core/kit/testing.py"}


def _build_flags() -> list[str]:
    """Offline when the installed setuptools and wheel can build orcr (as
    plugins/pi/tests/test_pi_distribution.py does), else an isolated build."""
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError:
        return []
    return ["--no-build-isolation"]


def _wheel_names(tmp: Path) -> list[str]:
    src = tmp / "src"
    ignore = shutil.ignore_patterns("tests", "build", "__pycache__", "*.egg-info", ".venv")
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "orcr_core", src / "orcr_core", ignore=ignore)
    shutil.copytree(ROOT / "plugins", src / "plugins", ignore=ignore)
    out = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *_build_flags()]
        + ["-w", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    (whl,) = out.glob("orcr-*.whl")
    return zipfile.ZipFile(whl).namelist()


def is_test_code(name: str) -> bool:
    """A wheel member that is test code: a test module, a conftest, a test folder,
    the herdr emulator or its schema, a ``testing`` module or package."""
    parts = name.split("/")
    stem = parts[-1].removesuffix(".py")
    return (
        stem.startswith("test_")
        or stem == "conftest"
        or stem == "testing"
        or bool({"tests", "testing", "herdr_schema", "orcr_testing"} & set(parts[:-1]))
        or "emulator" in name
        or name.endswith(".schema.json")
    )


def test_the_wheel_holds_no_test_code(tmp_path):
    """Planted: orcr_herdr.testing back in pyproject's packages (the emulator in the
    wheel) -> fails; orcr_tasks/testing.py back in the plugin -> fails."""
    names = _wheel_names(tmp_path)
    assert any(n.startswith("orcr_herdr/driver.py") for n in names), names  # a real wheel
    assert any(n.startswith("orcr_tasks/") for n in names), names
    assert sorted(n for n in names if is_test_code(n) and n not in ALLOWED) == []


def test_what_counts_as_test_code():
    """The filter itself: it names what moved out, and passes what users run."""
    for name in (
        "orcr_herdr/testing/emulator.py",
        "orcr_herdr/testing/herdr_schema/herdr-api.schema.json",
        "orcr_tasks/testing.py",
        "orcr_claude/tests/test_parse.py",
        "orcr_testing/plugin.py",
        "conftest.py",
    ):
        assert is_test_code(name), name
    for name in ("orcr_herdr/driver.py", "orcr_core/sdk/client.py", "orcr_tasks/queue.py"):
        assert not is_test_code(name), name
