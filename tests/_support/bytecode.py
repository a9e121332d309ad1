"""Bytecode for the suite's own Python, even where ``PYTHONDONTWRITEBYTECODE`` is set.

With the variable set (this machine sets it) and no ``__pycache__``, every Python
process the suite starts compiles the orcr modules it imports from source: 0.2 s of
the 0.5 s of CPU a server start costs, and the suite starts about 1,300 servers and
thousands of CLI processes. Each xdist worker also rewrote and compiled every test
module again at collection (6.5 s of CPU a worker).

So the controller compiles the checkout's own sources once (:func:`compileall`, into
the usual ``__pycache__`` folders, which git ignores; a second run only stats them),
and the pytest processes themselves cache what they import, the rewritten test
modules included. The processes the tests start keep the variable: they read that
bytecode and never write any, so a module a test writes and imports in a subprocess
is always compiled from its source. Measured in docs/internals.md ("Bytecode").
"""

from __future__ import annotations

import compileall
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the checkout's folders whose modules the suite's processes import
SOURCES = ("orcr_core", "plugins", "testing", "tests")
#: test modules: pytest compiles them itself (with rewritten asserts, its own file)
_TEST_MODULE = re.compile(r"(^|/)test_[^/]*\.py$")

sys.dont_write_bytecode = False  # this process's imports: test modules' rewrites too


def pytest_configure(config) -> None:
    if hasattr(config, "workerinput"):
        return  # the controller compiled before it started the workers
    for name in SOURCES:
        compileall.compile_dir(ROOT / name, quiet=1, rx=_TEST_MODULE)
