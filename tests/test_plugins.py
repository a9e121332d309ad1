"""Plugin manager: entry points, allow-list, duplicates, core never imports plugins."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from orcr_claude import ClaudeProvider

import orcr_core
from orcr_core.pm.plugins import PluginError, build_registry, get_plugin_manager

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_PACKAGES = {
    "orcr_herdr",
    "orcr_tmux",
    "orcr_providers",
    "orcr_claude",
    "orcr_codex",
    "orcr_tasks",
}


def test_core_never_imports_a_plugin_package():
    offenders = []
    for py in (ROOT / "orcr_core").rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{py.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in PLUGIN_PACKAGES
            ]
    assert offenders == []


def test_bundled_plugins_load_through_entry_points(monkeypatch):
    monkeypatch.delenv("ORCR_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("ORCR_PLUGIN_MODULES", raising=False)
    reg = build_registry(get_plugin_manager())
    assert {"herdr", "tmux"} <= set(reg.drivers)
    assert {"claude", "codex", "echo", "command"} <= set(reg.providers)
    assert reg.owners[("driver", "tmux")] == "tmux"


def test_load_plugins_allow_list_narrows(monkeypatch):
    monkeypatch.setenv("ORCR_LOAD_PLUGINS", "tmux")
    pm = get_plugin_manager()
    assert [n for n, _ in pm.list_name_plugin()] == ["tmux"]
    monkeypatch.setenv("ORCR_LOAD_PLUGINS", "")
    assert get_plugin_manager().list_name_plugin() == []


def test_loading_is_explicit_not_an_import_side_effect():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import orcr_core, orcr_core.cli, sys; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{sorted(PLUGIN_PACKAGES)!r}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


class _Dup:
    def __init__(self, name):
        self.name = name


def test_duplicate_names_are_refused_naming_both_plugins():
    pm = get_plugin_manager(load=False)

    class A:
        @orcr_core.hookimpl
        def register_providers(self, register):
            register(_Dup("same"))

    class B:
        @orcr_core.hookimpl
        def register_providers(self, register):
            register(_Dup("same"))

    pm.register(A(), name="plugin_a")
    pm.register(B(), name="plugin_b")
    with pytest.raises(PluginError) as e:
        build_registry(pm)
    assert "plugin_a" in str(e.value) and "plugin_b" in str(e.value) and "'same'" in str(e.value)


def _cmd_plugin(name: str, command: str):
    import click

    class P:
        @orcr_core.hookimpl
        def register_commands(self, cli):
            @cli.command(name=command)
            def _cmd():
                click.echo(name)

    return P()


def test_register_commands_attributes_names_and_refuses_clashes():
    import click

    from orcr_core.pm.plugins import register_commands

    pm = get_plugin_manager(load=False)
    pm.register(_cmd_plugin("a", "hello"), name="plugin_a")
    assert register_commands(pm, click.Group(), {"agent"}) == {"hello": "plugin_a"}

    pm.register(_cmd_plugin("b", "hello"), name="plugin_b")
    with pytest.raises(PluginError) as e:
        register_commands(pm, click.Group(), {"agent"})
    assert "'hello'" in str(e.value) and "plugin_a" in str(e.value) and "plugin_b" in str(e.value)

    pm = get_plugin_manager(load=False)
    pm.register(_cmd_plugin("x", "agent"), name="plugin_x")
    with pytest.raises(PluginError, match="'agent' is added by plugin 'plugin_x'.*built in"):
        register_commands(pm, click.Group(), {"agent"})


CMD_PLUGIN = """import click, orcr_core
@orcr_core.hookimpl
def register_commands(cli):
    @cli.command(name='greet')
    @click.argument('who')
    def greet(who):
        "Greet WHO."
        click.echo('hi ' + who)
"""


def test_plugin_command_runs_and_cannot_replace_a_builtin(orcr_home, tmp_path):
    (tmp_path / "orcr_cmdplugin.py").write_text(CMD_PLUGIN)
    env = {
        "PYTHONPATH": f"{tmp_path}:{orcr_home.env['PYTHONPATH']}",
        "ORCR_PLUGIN_MODULES": "orcr_test_driver,orcr_cmdplugin",
    }
    assert orcr_home.run("greet", "bob", env=env, check=True).stdout == "hi bob\n"
    assert "Greet WHO." in orcr_home.run("--help", env=env, check=True).stdout
    r = orcr_home.run("nosuch", env=env)  # still unknown after asking the plugins
    assert r.returncode == 2 and "No such command 'nosuch'" in r.stderr

    (tmp_path / "orcr_cmdplugin.py").write_text(
        "import click, orcr_core\n"
        "@orcr_core.hookimpl\n"
        "def register_commands(cli):\n"
        "    cli.add_command(click.Command('doctor', callback=lambda: None))\n"
    )
    r = orcr_home.run("greet", env=env)
    assert r.returncode == 1 and "'doctor'" in r.stderr and "orcr_cmdplugin" in r.stderr


def test_misspelt_hook_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "orcr_badplugin.py").write_text(
        "import orcr_core\n@orcr_core.hookimpl\ndef register_provider(register):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ORCR_LOAD_PLUGINS", "")
    monkeypatch.setenv("ORCR_PLUGIN_MODULES", "orcr_badplugin")
    with pytest.raises(PluginError, match="register_provider"):
        get_plugin_manager()


def test_orcr_plugins_lists_versions(orcr_home):
    rows = json.loads(orcr_home.run("plugins", "--json", check=True).stdout)
    by = {r["name"]: r for r in rows}
    assert by["tmux"]["version"] == orcr_core.__version__ and by["tmux"]["drivers"] == ["tmux"]
    assert by["orcr_test_driver"]["providers"] == ["testp", "testq", "testr"]
    # each provider with the release range its adapter was checked against
    claude = by["claude"]["supported_versions"]["claude"]
    assert claude and claude == ClaudeProvider.supported_versions
    text = orcr_home.run("plugins", check=True).stdout
    assert f"  providers: claude ({claude})\n" in text


CLIENT_PATH = [
    ["agent", "run", "--provider", "testp", "--path", "imp/a", "hi"],
    ["agent", "ls"],
    ["agent", "ls", "--unmanaged"],
    ["agent", "get", "imp/a"],
    ["agent", "kill", "imp/a"],
    ["server", "status"],
    ["events", "imp", "--kind", "agent.queued", "--since", "10m"],
]


#: the hot verbs in their common shapes: the fast path, which must not load click
HOT_PATH = [
    ["agent", "run", "--provider", "testp", "--path", "hot/a", "--json", "hi"],
    ["agent", "ls", "hot", "--all"],
    ["agent", "get", "hot/a", "--json"],
    ["agent", "send", "hot/a", "again", "--timeout", "30m"],
    ["agent", "wait", "hot/a", "--until", "idle", "--timeout", "0.1s"],
    ["agent", "read", "hot/a", "--last"],
    ["agent", "kill", "hot/a"],
]
#: what the whole client path must not import (30-90 ms each)
HEAVY = {"peewee", "pluggy", "croniter", "tomlkit", "textual"}
#: what the hot verbs must not import either: click, and the standard library's
#: slow starters (inspect and typing come with dataclasses; socket.py with its enums)
HOT_HEAVY = HEAVY | {
    "click", "inspect", "typing", "dataclasses", "datetime", "uuid", "subprocess",
    "socket", "selectors", "platformdirs",
}  # fmt: skip


def imported(env: dict, args: list[str], forbidden: set[str]) -> list[str]:
    """The ``forbidden`` top-level modules that ``orcr ARGS`` imported."""
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['orcr'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('orcr_core.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"bad = sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(forbidden)!r}))\n"
        "sys.stderr.write('HEAVY=' + ','.join(bad) + '\\n')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, *args], env=env, capture_output=True, text=True, timeout=30
    )
    heavy = [ln for ln in r.stderr.splitlines() if ln.startswith("HEAVY=")]
    assert len(heavy) == 1, (args, r.stderr)
    return [m for m in heavy[0].removeprefix("HEAVY=").split(",") if m]


def test_client_path_imports_no_heavy_modules(server):
    """The CLI's client path must not import peewee, pluggy or croniter (30-90 ms each)."""
    for args in CLIENT_PATH:
        assert imported(server.env, args, HEAVY) == [], args


def test_hot_verbs_import_neither_click_nor_slow_stdlib(server):
    """agent run|ls|get|send|wait|read|kill in their common shapes skip click (issue 39).
    Planted: main() going straight to click -> fails ('click'); the client importing
    the lock file at the top -> fails ('dataclasses', 'inspect')."""
    for args in HOT_PATH:
        assert imported(server.env, args, HOT_HEAVY) == [], args


def test_a_plugin_that_fails_to_import_is_a_clear_error(orcr_home, tmp_path):
    (tmp_path / "orcr_brokenplugin.py").write_text("import no_such_module_here\n")
    env = {
        "PYTHONPATH": f"{tmp_path}:{orcr_home.env['PYTHONPATH']}",
        "ORCR_PLUGIN_MODULES": "orcr_test_driver,orcr_brokenplugin",
    }
    r = orcr_home.run("--help", env=env)
    assert r.returncode == 1 and "no_such_module_here" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "ORCR_BLOCK_PLUGINS" in r.stderr
