"""The layout a newcomer reads: the module graph has no circles, plugins import only
orcr's public surface, and the root of ``orcr_core`` holds only the public contracts.

Every import counts, the ones inside functions included (a function-level import
that closes a circle is a circle held together by import order). Imports under
``if TYPE_CHECKING:`` and ``if __name__ == "__main__":`` do not run when the module
is imported, so they do not count; importing ``a.b.c`` imports ``a`` and ``a.b``
first, so those count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from orcr_core._deprecated import MOVED

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "orcr_core"

#: orcr_core's root: the public contracts only (docs/plugins/kit.md), plus the
#: table of moved modules' old paths. A new module goes into a room (a sub-package).
ROOT_MODULES = {"__init__", "_deprecated", "dirs", "hookspecs", "paths", "protocol"}
#: the root's packages that are public contracts too (the rest of the root's packages
#: are rooms): ``contracts`` is the driver's and the provider's, one module each
ROOT_CONTRACT_PACKAGES = {"contracts", "kit", "sdk"}

#: what a plugin may import: the contracts at the root, the SDK, the provider kit, and
#: the config a driver factory is handed (docs/plugins/kit.md)
PUBLIC = {
    "orcr_core",
    "orcr_core.contracts",
    "orcr_core.dirs",
    "orcr_core.hookspecs",
    "orcr_core.paths",
    "orcr_core.protocol",
    "orcr_core.config",
}
PUBLIC_PACKAGES = ("orcr_core.sdk", "orcr_core.kit")

#: bundled plugins' imports of internals, each with why (a third party's plugin has
#: none of these; the test fails if one is no longer needed)
INTERNAL_USES = {
    ("orcr_tasks", "orcr_core.store.faults"): "the task queue's fault points, which the "
    "crash tests SIGKILL at (docs/internals.md, Fault injection)",
    ("orcr_tasks", "orcr_core.notify.notices"): "the durable notices orcr tasks writes for "
    "the server's notifications (a task parked or failed)",
    ("orcr_tasks", "orcr_core.store.lean"): "arm_psycopg: a process that imported peewee "
    "without its PostgreSQL driver (the server) gets it back before a queue opens",
    ("orcr_gemini", "orcr_core.store.durable"): "fsync_dir, for the settings file it "
    "writes for a Gemini CLI agent",
    ("orcr_testing", "orcr_core.ceilings.v1"): "the orcr_home fixture drops its test "
    "instance's ceiling groups at teardown (no public call ends an instance for good)",
    ("orcr_testing", "orcr_core.cli.fast"): "OrcrHome.run runs the CLI's fast path in the "
    "test process (orcr_testing/incli.py), as click's CliRunner runs a click command",
    ("orcr_testing", "orcr_core.cli.app"): "and, for config and server status, its click "
    "group (orcr_testing/incli.py)",
}

#: import edges that may close a circle, each with why. Empty: the CLI's lazy
#: commands are named by strings (orcr_core/cli/app.py imports them with importlib),
#: so they add no edge, and every other circle was cut by a leaf module (issue 34).
ALLOWED_CIRCLE_EDGES: dict[tuple[str, str], str] = {}


def _packages() -> dict[str, Path]:
    """Each top-level package of this repository: orcr_core and every plugin's."""
    found = {"orcr_core": ROOT}
    for init in sorted(REPO.glob("plugins/*/orcr_*/__init__.py")):
        found[init.parent.name] = init.parent
    # the test distribution (testing/: the herdr emulator), outside orcr's wheel
    found["orcr_testing"] = REPO / "testing" / "orcr_testing"
    return found


def _modules(packages: dict[str, Path]) -> dict[str, Path]:
    mods = {}
    for top, folder in packages.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("").parts
            if {"tests", "build"} & set(rel):
                continue
            parts = (top, *rel)
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _not_run_on_import(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:`` and ``if __name__ == "__main__":``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
            "__name__ == '__main__'",
        ):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _imports(path: Path, mods: dict[str, Path] | None = None) -> list[str]:
    """Every module name ``path`` imports, function-level imports included:
    ``from m import name`` is ``m.name`` when that is a module (in ``mods``, or an
    old path in MOVED), else ``m``."""
    tree = ast.parse(path.read_text())
    skip = _not_run_on_import(tree)
    names = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.append(full if full in (mods or {}) or full in MOVED else node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


def _graph(packages: dict[str, Path] | None = None) -> dict[str, set[str]]:
    mods = _modules(packages or _packages())
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = graph.setdefault(name, set())
        for target in _imports(path, mods):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):  # the module and the packages it is in
                dep = ".".join(parts[:i])
                if dep in mods and dep != name and not name.startswith(dep + "."):
                    deps.add(dep)  # (a module's own packages are imported before it)
    for (src, dst), _why in ALLOWED_CIRCLE_EDGES.items():
        graph.get(src, set()).discard(dst)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circles_function_level_imports_included():
    """orcr_core and every plugin package. Planted (each cut undone in turn): orcr_tmux's
    control taking SESSION_PREFIX from driver, notify.rules importing parse_duration from
    orcr_core.config, orcr_tasks.spent taking whereabouts from guard -> each fails."""
    graph = _graph()
    assert "orcr_core.server.app" in graph and "orcr_tmux.driver" in graph  # both walked
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_allowed_circle_edges_are_still_imports():
    for src, dst in ALLOWED_CIRCLE_EDGES:
        mods = _modules(_packages())
        assert dst in _imports(mods[src], mods)


def test_cycle_finder_bites():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_counts_function_level_imports_but_not_type_checking_ones(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import p.b\n")
    (pkg / "b.py").write_text("def f():\n    from p.a import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import x\n"
        "if __name__ == '__main__':\n    import p.a\n"
    )
    graph = _graph({"p": pkg})
    assert _cycle(graph) == ["p.a", "p.b", "p.a"]
    assert graph["p.c"] == set()


def _plugin_imports_of_orcr_core() -> dict[tuple[str, str], list[str]]:
    """(plugin package, orcr_core module it imports) -> the files that do."""
    mods = _modules({"orcr_core": ROOT})
    found: dict[tuple[str, str], list[str]] = {}
    for top, folder in _packages().items():
        if top == "orcr_core":
            continue
        for path in _modules({top: folder}).values():
            for module in _imports(path, mods):  # an old path (MOVED) is never public
                if module.split(".")[0] == "orcr_core":
                    found.setdefault((top, module), []).append(str(path.relative_to(REPO)))
    return found


def _public(module: str) -> bool:
    return module in PUBLIC or any(
        module == p or module.startswith(p + ".") for p in PUBLIC_PACKAGES
    )


def test_plugins_import_only_the_public_surface():
    """From the AST, function-level imports included. Planted: orcr_herdr's driver
    importing from orcr_core.store.models, orcr_pi importing orcr_core.jsonl_tail (the
    old path) -> fails."""
    uses = _plugin_imports_of_orcr_core()
    assert ("orcr_claude", "orcr_core.kit.adapter_helpers") in uses  # the walk sees plugins
    wrong = {k: v for k, v in uses.items() if not _public(k[1]) and k not in INTERNAL_USES}
    assert wrong == {}, "plugins import orcr internals (docs/plugins/kit.md says what is public)"
    assert sorted(set(INTERNAL_USES) - set(uses)) == [], "no longer used: drop it"


def test_the_root_holds_only_the_public_contracts():
    """A module at orcr_core's root is a public contract (docs/plugins/kit.md); the
    rest lives in rooms. Planted: a new orcr_core/helpers.py -> fails."""
    assert {p.stem for p in ROOT.glob("*.py")} == ROOT_MODULES
    assert all((ROOT / name / "__init__.py").exists() for name in ROOT_CONTRACT_PACKAGES)
    for old, new in MOVED.items():
        assert not (REPO / (old.replace(".", "/") + ".py")).exists(), f"{old} is back"
        assert (REPO / (new.replace(".", "/") + ".py")).exists() or (
            REPO / new.replace(".", "/") / "__init__.py"
        ).exists(), new


#: the most lines a module of orcr_core or of a plugin may have (STYLE.md: keep files
#: small by responsibility; a module past it does two jobs, so split it by job)
MAX_LINES = 450

#: modules still past MAX_LINES, each until its split lands (the test fails when one
#: is back under: drop it)
OVER_MAX_LINES: set[str] = set()


def test_no_module_is_past_450_lines():
    """orcr_core, every plugin package and orcr_testing, tests aside. Planted: 460 lines
    of comments appended to orcr_core/contracts/driver.py -> fails."""
    mods = _modules(_packages())
    assert "orcr_core.contracts.driver" in mods and "orcr_tmux.driver" in mods
    sizes = {name: len(path.read_text().splitlines()) for name, path in mods.items()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert sorted(set(over) - OVER_MAX_LINES) == [], over
    assert sorted(OVER_MAX_LINES - set(over)) == [], "back under: drop it"


def test_lifecycle_modules_live_in_agents():
    """The folders show the architecture: the agent lifecycle has its own package."""
    for name in ("queue", "pipeline", "monitor", "lifecycle", "reconcile"):
        assert (ROOT / "agents" / f"{name}.py").exists()
        assert not (ROOT / f"{name}.py").exists()


def test_every_package_is_in_the_distribution():
    """pyproject.toml lists packages one by one: a sub-package missing there works in an
    editable install (the folder is on the path) and is absent from a built wheel."""
    import tomllib

    repo = ROOT.parent
    setup = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {name: repo / path for name, path in setup["package-dir"].items()}
    dirs["orcr_core"] = ROOT
    found = set()
    for top, folder in dirs.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            if "tests" not in rel:
                found.add(".".join((top, *rel)))
    assert sorted(found - set(setup["packages"])) == []


#: plugin folders that are distributions of their own (their own pyproject.toml, installed
#: like a third party's plugin, never by the main project's install)
SEPARATE_DISTRIBUTIONS = {"pi": "orcr-pi"}


def test_each_plugin_folder_is_bundled_or_a_distribution_of_its_own():
    """A folder under plugins/ is either bundled (its package in the main pyproject's
    package-dir and packages) or a separate distribution (SEPARATE_DISTRIBUTIONS: its
    own pyproject.toml lists its packages and its `orcr` entry point, and the main
    pyproject names none of them), never half of each."""
    import tomllib

    repo = ROOT.parent
    main = tomllib.loads((repo / "pyproject.toml").read_text())
    setup = main["tool"]["setuptools"]
    bundled = {str(Path(p).parts[1]) for p in setup["package-dir"].values()}
    main_eps = set(main["project"]["entry-points"]["orcr"].values())
    folders = {
        p.name for p in (repo / "plugins").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    assert sorted(folders - bundled - set(SEPARATE_DISTRIBUTIONS)) == []
    for folder, dist in SEPARATE_DISTRIBUTIONS.items():
        assert folder not in bundled
        own = tomllib.loads((repo / "plugins" / folder / "pyproject.toml").read_text())
        assert own["project"]["name"] == dist
        assert "orcr" in " ".join(own["project"]["dependencies"])
        packages = own["tool"]["setuptools"]["packages"]
        found = {
            ".".join(init.parent.relative_to(repo / "plugins" / folder).parts)
            for init in (repo / "plugins" / folder).rglob("__init__.py")
            if not {"tests", "build"} & set(init.parts)  # build/: a local wheel build's copy
        }
        assert sorted(found - set(packages)) == []
        assert not set(packages) & set(setup["packages"]), "also in the main distribution"
        assert set(own["project"]["entry-points"]["orcr"].values()) <= set(packages)
        assert not main_eps & set(packages), "its entry point also in the main pyproject"
