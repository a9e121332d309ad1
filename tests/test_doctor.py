"""``orcr doctor``: the real CLI against controlled PATHs, stores and servers."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from orcr_core.cli.doctor_probe import parse_version
from orcr_core.store.db import SCHEMA_VERSION

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux not installed")


@pytest.fixture
def doc(orcr_home, short_tmp):
    """Run ``orcr doctor --json`` with PATH = a private bin dir; returns (rc, rows by check, out)."""
    bin_dir = short_tmp / "bin"
    bin_dir.mkdir()
    env = {
        "PATH": str(bin_dir),
        "CLAUDE_CONFIG_DIR": str(short_tmp / "claude"),
        "CODEX_HOME": str(short_tmp / "codex"),
        "XDG_CONFIG_HOME": str(short_tmp / "xdg"),
    }

    class Doc:
        bin = bin_dir
        home = orcr_home

        def tool(self, name: str, output: str) -> Path:
            path = bin_dir / name
            path.write_text(f"#!/bin/sh\necho '{output}'\n")
            path.chmod(0o755)
            return path

        def tmux(self) -> None:
            (bin_dir / "tmux").symlink_to(TMUX)

        def run(self, *extra):
            r = orcr_home.run("doctor", "--json", *extra, env=env, timeout=60)
            data = json.loads(r.stdout)
            rows = {row["check"]: row for row in data["checks"]}
            assert data["ok"] is (r.returncode == 0), r.stdout
            return r.returncode, rows

        def plain(self):
            return orcr_home.run("doctor", env=env, timeout=60)

    orcr_home.config("")  # all defaults: driver auto
    return Doc()


@needs_tmux
def test_tmux_available_is_ok(doc):
    doc.tmux()
    doc.tool("claude", "2.1.38 (Claude Code)")
    rc, rows = doc.run()
    assert rc == 0
    assert rows["driver"]["level"] == "ok" and rows["driver"]["detail"].startswith("tmux (auto")
    assert rows["tmux"]["level"] == "ok" and "tmux 3." in rows["tmux"]["detail"]
    assert rows["herdr"]["level"] == "warn" and "uses tmux instead" in rows["herdr"]["detail"]
    claude = rows["claude cli"]
    assert claude["level"] == "ok" and "claude 2.1.38" in claude["detail"], claude
    assert rows["codex cli"]["level"] == "warn" and "not found" in rows["codex cli"]["detail"]
    assert rows["server"]["level"] == "warn" and rows["server"]["fix"]  # warning, not failure
    assert rows["store"]["level"] == "ok" and "no store yet" in rows["store"]["detail"]
    assert rows["caps"]["detail"] == "global 25; per provider: none; min free memory auto"
    for row in rows.values():
        assert row["ok"] == (row["level"] == "ok")
        assert (row["fix"] is None) == row["ok"], row


def test_forced_herdr_without_binary_fails_with_install_fix(doc):
    doc.home.config('[driver]\nname = "herdr"\n')
    rc, rows = doc.run()
    assert rc == 1
    driver = rows["driver"]
    assert driver["level"] == "fail" and "herdr" in driver["detail"]
    assert "install herdr" in driver["fix"]
    assert rows["herdr"]["level"] == "fail"
    r = doc.plain()
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("FAIL  driver:"))
    assert lines[i + 1].strip().startswith("fix: install herdr 0.9")
    assert lines[-1].startswith("orcr cannot run agents")


def test_no_multiplexer_at_all_fails(doc):
    rc, rows = doc.run()
    assert rc == 1
    assert rows["driver"]["level"] == "fail" and "tmux" in rows["driver"]["fix"]


@needs_tmux
@needs_tmux
def test_every_provider_with_a_cli_gets_its_row(doc):
    """Rows come from each adapter's ``cli`` (its command and install line), not a list in
    the core: Gemini CLI and OpenCode are checked like claude; echo, with no CLI, is not."""
    doc.tmux()
    doc.tool("gemini", "0.61.0")
    doc.tool("opencode", "1.17.2")
    rc, rows = doc.run()
    assert rc == 0
    gemini = rows["gemini cli"]
    assert gemini["level"] == "ok" and "gemini 0.61.0" in gemini["detail"], gemini
    opencode = rows["opencode cli"]
    assert opencode["level"] == "fail" and "==1.18.*" in opencode["detail"], opencode
    assert "allow_unpinned" in opencode["fix"]
    assert "echo cli" not in rows and "command cli" not in rows
    doc.home.config('[agent]\nprovider = "gemini"\n')
    (doc.bin / "gemini").unlink()
    rc, rows = doc.run()
    assert rows["gemini cli"]["level"] == "warn"
    assert "npm install -g @google/gemini-cli" in rows["gemini cli"]["fix"]
    default = rows["default provider"]
    assert default["level"] == "warn" and "npm install -g @google/gemini-cli" in default["fix"]


def test_claude_outside_pinned_range_is_flagged(doc):
    doc.tmux()
    doc.tool("claude", "2.3.0 (Claude Code)")
    rc, rows = doc.run()
    assert rc == 0  # orcr itself can run agents; claude agents cannot
    row = rows["claude cli"]
    assert row["level"] == "fail"
    assert "2.3.0" in row["detail"] and "outside" in row["detail"] and "<2.2" in row["detail"]
    assert "allow_unpinned" in row["fix"]
    doc.home.config("[providers.claude]\nallow_unpinned = true\n")
    rc, rows = doc.run()
    assert rows["claude cli"]["level"] == "warn" and "degraded" in rows["claude cli"]["detail"]


@needs_tmux
def test_custom_provider_argv_and_prerelease_version(doc):
    doc.tmux()
    doc.tool("mycodex", "codex-cli 0.104.0-alpha.1")
    doc.home.config('[providers.codex]\nargv = ["mycodex", "--flag"]\n')
    rc, rows = doc.run()
    row = rows["codex cli"]
    assert row["level"] == "ok" and "0.104.0-alpha.1" in row["detail"], row
    # codex under tmux: orcr's notify program reports the thread id, herdr is optional
    integ = rows["herdr codex integration"]
    assert integ["level"] == "ok" and "notify" in integ["detail"]
    # without notify, nothing would report it under tmux: doctor says so
    doc.home.config('[providers.codex]\nargv = ["mycodex", "--flag"]\nnotify = false\n')
    rc, rows = doc.run()
    integ = rows["herdr codex integration"]
    assert integ["level"] == "warn" and "need herdr" in integ["detail"]


def test_newer_store_fails(doc):
    store = doc.home.path / "store.db"
    conn = sqlite3.connect(store)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    conn.commit()
    conn.close()
    before = store.read_bytes()
    doc.home.config('[driver]\nname = "test"\n')
    rc, rows = doc.run()
    assert rc == 1
    row = rows["store"]
    assert row["level"] == "fail" and "99" in row["detail"]
    assert row["fix"].startswith("upgrade orcr")
    assert store.read_bytes() == before and not Path(str(store) + "-wal").exists()


def test_running_server_and_integration_found(doc):
    doc.home.config('[driver]\nname = "test"\n[concurrency]\nmax = 7\nclaude = 2\n')
    doc.home.start_server()
    codex_home = doc.home.path.parent / "codex"
    codex_home.mkdir()
    (codex_home / "herdr-agent-state.sh").write_text("HERDR_INTEGRATION_VERSION=7\n")
    rc, rows = doc.run()
    assert rc == 0
    assert rows["driver"]["detail"].startswith("test")
    server = rows["server"]
    assert server["level"] == "ok" and "protocol 1" in server["detail"], server
    assert rows["store"]["level"] == "ok" and f"schema {SCHEMA_VERSION}" in rows["store"]["detail"]
    assert rows["caps"]["detail"] == "global 7; per provider: claude 2; min free memory auto"
    assert rows["herdr codex integration"]["detail"].startswith("installed (v7)")


@pytest.mark.parametrize("protocol, level", [(20, "ok"), (22, "ok"), (18, "fail"), (21, "fail")])
def test_herdr_protocol_from_a_live_herdr(doc, protocol, level):
    pytest.importorskip("orcr_testing.herdr.emulator")
    from orcr_testing.herdr.emulator import Emulator

    doc.tool("herdr", "herdr 0.8.0")
    sock = doc.bin.parent / "xdg" / "herdr" / "sessions" / "orcr" / "herdr.sock"
    sock.parent.mkdir(parents=True)
    emu = Emulator(sock, sock.parent, protocol=protocol, shell=["/bin/sh"], session="orcr")
    emu.start()
    try:
        doc.home.config('[driver]\nname = "herdr"\n[herdr]\nsession = "orcr"\n')
        rc, rows = doc.run()
    finally:
        emu.stop(save=False)
    assert rows["herdr"]["level"] == "ok" and "herdr 0.8.0" in rows["herdr"]["detail"]
    row = rows["herdr protocol"]
    assert row["level"] == level, row
    assert f"protocol {protocol}" in row["detail"] or str(protocol) in row["detail"]
    assert rc == (0 if level == "ok" else 1)
    if level == "ok":  # the capabilities ping reports
        assert "ping capabilities: " in row["detail"] and "live_handoff" in row["detail"]
        assert ("health_check" in row["detail"]) == (protocol == 22)
    else:  # the refusal names what orcr supports
        assert "0.9.x (socket protocol 22) or 0.8.x (socket protocol 19 or 20)" in row["detail"]


def test_herdr_server_not_running_is_a_warning(doc):
    doc.tool("herdr", "herdr 0.8.0")
    rc, rows = doc.run()
    assert rows["driver"]["detail"].startswith("herdr")
    row = rows["herdr protocol"]
    assert row["level"] == "warn" and "not running" in row["detail"]
    assert rc == 0


def test_parse_version():
    assert parse_version("2.1.38 (Claude Code)") == "2.1.38"
    assert parse_version("codex-cli 0.104.0-alpha.1") == "0.104.0-alpha.1"
    assert parse_version("tmux 3.3a") == "3.3"
    assert parse_version("no digits") is None


def _zero_page_of(store: Path, index: str = "agent_status_seq") -> None:
    """Zero the b-tree root page of ``index``: the schema reads, the index is broken."""
    conn = sqlite3.connect(store)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)).fetchone()
    conn.close()
    with open(store, "r+b") as f:
        f.seek((root[0] - 1) * page_size)
        f.write(b"\0" * page_size)


def _index_out_of_step(store: Path) -> None:
    """Rows an index does not hold: integrity_check lists them (the file itself reads fine)."""
    conn = sqlite3.connect(store)
    conn.execute("INSERT INTO event (ts, kind, data) VALUES (1.0, 'a.b', '{}')")
    conn.commit()
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_master SET sql = replace(sql, '(\"agent\")', '(\"kind\")') "
        "WHERE name = 'event_agent'"
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "corrupt, words",
    [(_zero_page_of, "malformed"), (_index_out_of_step, "missing from index event_agent")],
)
def test_corrupted_store_fails_the_integrity_check(doc, corrupt, words):
    from orcr_core.store.db import close_store, open_store

    store = doc.home.path / "store.db"
    open_store(store)
    close_store()
    doc.home.config('[driver]\nname = "test"\n')
    rc, rows = doc.run()
    assert rows["store"]["level"] == "ok" and "integrity_check ok" in rows["store"]["detail"]
    corrupt(store)
    rc, rows = doc.run()
    assert rc == 1
    row = rows["store"]
    assert row["level"] == "fail" and "fails PRAGMA integrity_check" in row["detail"], row
    assert words in row["detail"]
    assert "move" in row["fix"] and ".recover" in row["fix"]


def test_large_store_gets_quick_check(doc, monkeypatch):
    import orcr_core.cli.doctor_store as doctor_mod
    from orcr_core.store.db import close_store, open_store

    store = doc.home.path / "store.db"
    open_store(store)
    close_store()
    monkeypatch.setattr(doctor_mod, "QUICK_CHECK_OVER", 0)
    problems, how = doctor_mod._integrity(store)
    assert (problems, how) == ([], "quick_check")


@pytest.mark.parametrize(
    "config, level, words",
    [
        ("", "warn", "claude (agent.provider) needs the 'claude' CLI, which is not found"),
        ('[agent]\nprovider = "echo"\n', "ok", "echo (agent.provider)"),
        ('[agent]\nprovider = "nosuch"\n', "warn", "'nosuch' is not an installed provider"),
    ],
)
def test_default_provider_cli(doc, config, level, words):
    doc.home.config('[driver]\nname = "test"\n' + config)
    rc, rows = doc.run()  # PATH is a private, empty bin dir: no claude
    row = rows["default provider"]
    assert row["level"] == level and words in row["detail"], row
    if level == "warn":
        assert "orcr config set agent.provider" in row["fix"]


def test_default_provider_cli_found(doc):
    doc.tool("claude", "2.1.38 (Claude Code)")
    doc.home.config('[driver]\nname = "test"\n')
    rc, rows = doc.run()
    assert rows["default provider"]["level"] == "ok"
