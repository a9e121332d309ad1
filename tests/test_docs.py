"""Docs that check themselves: generated CLI reference, hooks, socket methods, config keys,
event kinds, environment variables, and the example plugin of the tutorial."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from orcr_core import hookspecs
from orcr_core.config import DEFAULTS, VALIDATORS
from orcr_core.contracts import LaunchSpec, Provider, TranscriptReader

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLE = DOCS / "plugins" / "example"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _headings(path: Path) -> set[str]:
    return {m.strip() for m in re.findall(r"^#{1,6} (.+)$", path.read_text(), re.M)}


def test_cli_reference_is_generated_from_the_current_help():
    gen = _load(DOCS / "gen_cli.py", "orcr_docs_gen_cli")
    assert (DOCS / "cli.md").read_text() == gen.render(), (
        "docs/cli.md is stale: run python docs/gen_cli.py"
    )


def test_cli_reference_covers_every_command():
    import click

    from orcr_core.cli import cli

    text = (DOCS / "cli.md").read_text()

    def walk(cmd, path):
        yield path
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if not sub.hidden:  # plumbing run by agents, not people
                    yield from walk(sub, f"{path} {name}")

    missing = [p for p in walk(cli, "orcr") if f"## {p}\n" not in text]
    assert missing == [], "run python docs/gen_cli.py"


def test_every_hook_has_a_heading_with_its_exact_signature():
    heads = _headings(DOCS / "plugins" / "hooks.md")
    hooks = [
        (name, fn)
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "orcr_spec")
    ]
    assert hooks, "no hookspecs found"
    missing = [
        f"{name}{inspect.signature(fn)}"
        for name, fn in hooks
        if f"{name}{inspect.signature(fn)}" not in heads
        and f"`{name}{inspect.signature(fn)}`" not in heads
    ]
    assert missing == [], f"docs/plugins/hooks.md lacks headings for {missing}"


def test_every_socket_method_is_documented():
    from orcr_core.server.handlers import HANDLERS

    heads = _headings(DOCS / "socket-api.md")
    missing = [m for m in sorted(HANDLERS) if f"`{m}`" not in heads]
    assert missing == [], f"docs/socket-api.md lacks a heading for {missing}"


def _doc_key(key: str) -> str:
    return key.replace("*", "<name>")


def test_every_config_key_is_documented():
    text = (DOCS / "configuration.md").read_text()
    keys = set(VALIDATORS)
    keys |= {f"{s}.{k}" for s, sec in DEFAULTS.items() for k in sec}
    missing = sorted(k for k in keys if f"`{_doc_key(k)}`" not in text)
    assert missing == [], f"docs/configuration.md lacks {missing} (write * as <name>)"


def test_every_config_key_documents_its_range():
    from orcr_core.config import allowed

    rows = {}
    for line in (DOCS / "configuration.md").read_text().splitlines():
        m = re.match(r"\| `([a-z_.<>]+)` \|", line)
        if m:
            rows[m.group(1)] = line.replace("`", "")
    wrong = {
        k: allowed(k.replace("*", "x"))
        for k in VALIDATORS
        if allowed(k.replace("*", "x")) not in rows.get(_doc_key(k), "")
    }
    assert wrong == {}, f"docs/configuration.md: these keys' rows must say what they allow: {wrong}"


def _string_constants(path: Path) -> set[str]:
    return {
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_every_emitted_event_kind_is_documented():
    text = (DOCS / "socket-api.md").read_text()
    kinds = set()
    for py in (ROOT / "orcr_core").rglob("*.py"):  # the state changes; not socket methods or CLI
        if py.parent.name in ("server", "cli", "top"):  # top consumes events, emits none
            continue
        kinds |= {
            s
            for s in _string_constants(py)
            if re.fullmatch(r"(agent|pane|prompt|loop|run|unmanaged|budget)\.[a-z_]+", s)
        }
    kinds -= {"agent.provider", "agent.rm"}  # config keys, not events
    assert {"agent.status", "agent.queued"} <= kinds
    missing = sorted(k for k in kinds if f"`{k}`" not in text)
    assert missing == [], f"docs/socket-api.md lacks event kinds {missing}"


def test_every_orcr_environment_variable_is_documented():
    text = (DOCS / "configuration.md").read_text()
    names = set()
    for py in (ROOT / "orcr_core").rglob("*.py"):  # env var names appear as string literals
        names |= {s for s in _string_constants(py) if re.fullmatch(r"ORCR_[A-Z_]+", s)}
    assert {"ORCR_HOME", "ORCR_LOAD_PLUGINS", "ORCR_FAULT"} <= names
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert missing == [], f"docs/configuration.md lacks {missing}"


def test_every_fault_point_is_documented():
    text = (DOCS / "internals.md").read_text()
    points = set()
    for py in (ROOT / "orcr_core").rglob("*.py"):
        points |= set(re.findall(r"faults\.point\(\s*\"([a-z_]+)\"", py.read_text()))
    assert {"before_start", "server_start"} <= points
    missing = sorted(p for p in points if f"`{p}`" not in text)
    assert missing == [], f"docs/internals.md lacks fault points {missing}"


def test_relative_links_resolve():
    broken = []
    for md in DOCS.rglob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", md.read_text()):
            if not (md.parent / target).exists():
                broken.append(f"{md.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_every_test_named_in_the_planted_bugs_tables_exists():
    """docs/internals.md's "Planted bugs" and the soak's planted-bug table name tests
    (``path::name``) and soak commands a reader reruns: each test file exists and
    defines that test. Planted: a name misspelt in the table -> fails."""
    text = (DOCS / "internals.md").read_text()
    section = text.split("\n## Planted bugs\n", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`((?:tests|plugins)/[\w/]+\.py)::(test_\w+)`", text)
    assert len(re.findall(r"::test_\w+`", section)) >= 20, "the table lost its rows"
    missing = []
    for path, name in named:
        file = ROOT / path
        if not file.is_file() or not re.search(rf"^\s*def {name}\(", file.read_text(), re.M):
            missing.append(f"{path}::{name}")
    assert missing == [], f"docs/internals.md names tests that do not exist: {missing}"


# ---------------------------------------------------------------- the tutorial's plugin
@pytest.fixture
def example(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    sys.modules.pop("orcr_example_provider", None)
    import orcr_example_provider

    yield orcr_example_provider
    sys.modules.pop("orcr_example_provider", None)


def test_example_plugin_registers_through_the_plugin_manager(example, monkeypatch):
    from orcr_core.pm.plugins import build_registry, get_plugin_manager

    monkeypatch.setenv("ORCR_LOAD_PLUGINS", "")
    monkeypatch.setenv("ORCR_PLUGIN_MODULES", "orcr_example_provider")
    reg = build_registry(get_plugin_manager())
    assert list(reg.providers) == ["upper"]
    assert reg.owners[("provider", "upper")] == "orcr_example_provider"
    assert isinstance(reg.providers["upper"], Provider)


def test_example_reader_follows_turns_incrementally(example, tmp_path):
    p = example.UpperProvider()
    spec = LaunchSpec(str(uuid.uuid4()), "demo/up", str(tmp_path), str(tmp_path))
    pointer = p.launch_session(spec)
    assert p.locate_transcript(pointer, spec) is None  # not written yet
    path = tmp_path / "upper.jsonl"
    reader = p.open_reader(str(path))
    assert isinstance(reader, TranscriptReader)
    assert reader.poll().state == "unknown"
    with open(path, "w") as f:
        f.write('{"type": "start", "version": "1.0.0"}\n{"type": "prompt", "text": "hi"}\n')
        f.write('{"type": "answer", "te')  # half a line: still being written
        f.flush()
        assert p.locate_transcript(pointer, spec) == str(path)
        s = reader.poll()
        assert (s.state, len(s.turns), s.version) == ("working", 1, "1.0.0")
        f.write('xt": "HI"}\n')
        f.flush()
        s = reader.poll()
        assert (s.state, s.final_text) == ("idle", "HI")
    assert p.check_version("1.4", {}) is None
    with pytest.raises(Exception, match="allow_unpinned"):
        p.check_version("2.0", {})


def test_example_agent_program_writes_the_transcript(example, tmp_path):
    import subprocess

    path = tmp_path / "t.jsonl"
    r = subprocess.run(
        [sys.executable, example.__file__, "--transcript", str(path)],
        input="hello\n\nagain\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and "HELLO" in r.stdout and "AGAIN" in r.stdout
    s = example.UpperProvider().open_reader(str(path)).poll()
    assert s.state == "idle" and [t.final_text for t in s.turns] == ["HELLO", "AGAIN"]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_example_plugin_end_to_end_on_tmux(orcr_home):
    """The tutorial's commands, for real: run, wait, read, send, kill on tmux."""
    sock = f"orcrdoc{uuid.uuid4().hex[:8]}"
    orcr_home.config(f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n')
    env = {
        "ORCR_PLUGIN_MODULES": "orcr_example_provider",
        "PYTHONPATH": f"{EXAMPLE}:{orcr_home.env.get('PYTHONPATH', '')}",
    }
    try:
        run = lambda *a: orcr_home.run(*a, env=env, check=True)  # noqa: E731
        run("agent", "run", "--provider", "upper", "--path", "demo/up", "hello there")
        run("agent", "wait", "demo/up", "--timeout", "30s")
        assert run("agent", "read", "demo/up").stdout.strip() == "HELLO THERE"
        run("agent", "send", "demo/up", "again")
        run("agent", "wait", "demo/up", "--timeout", "30s")
        assert run("agent", "read", "demo/up").stdout.strip() == "AGAIN"
        assert run("agent", "kill", "demo/up").stdout.split() == ["demo/up", "killed"]
    finally:
        orcr_home.run("server", "stop", env=env)
        import subprocess

        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        tmpdir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (tmpdir / sock).unlink(missing_ok=True)  # kill-server leaves the socket file


def test_example_plugin_adds_a_command(orcr_home):
    """The tutorial's last section: `orcr upper` comes from the example's register_commands."""
    env = {
        "ORCR_PLUGIN_MODULES": "orcr_example_provider",
        "PYTHONPATH": f"{EXAMPLE}:{orcr_home.env.get('PYTHONPATH', '')}",
    }
    assert orcr_home.run("upper", "hello", "there", env=env, check=True).stdout == "HELLO THERE\n"
    assert "upper" in orcr_home.run("--help", env=env, check=True).stdout
