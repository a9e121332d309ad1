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
