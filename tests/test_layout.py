"""The core's module graph has no cycles: a newcomer can read it bottom-up.

Only module-level imports count (an import inside a function is a deliberate
late binding, e.g. the CLI's lazy subcommands).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "orcr_core"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = graph.setdefault(name, set())
        for node in ast.parse(path.read_text()).body:  # module level only
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    target = full if full in modules else node.module
                    if target in modules and target != name:
                        deps.add(target)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules and a.name != name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if dep.startswith(node + "."):
                continue  # a package importing its own submodule is not a cycle
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


def test_core_has_no_import_cycles():
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_cycle_finder_bites():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


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
