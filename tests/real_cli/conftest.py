"""The real_cli tier's fixtures: orcr drives the real Claude Code / Codex TUIs on a real
multiplexer, each CLI talking to a fake model server (tests/fake_models) on 127.0.0.1.

``real`` gives a :class:`Real`: call ``real.claude(script)`` or ``real.codex(script)``
once to start the fake model API, write the CLI's private config folder (onboarding
done, the fake API key approved, the working folder trusted: no dialog appears) and
start an orcr server configured to run that CLI. Everything lives under one /tmp
folder per test; the CLIs' own background processes (Codex's app-server daemon) are
ended at teardown by their pid (they run from binaries inside that folder).

Every test here is marked ``real_cli`` and runs only when tier.availability() says
so (the root conftest reports the tier as not run otherwise).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from fake_models import Script, anthropic_server, chat_server, gemini_server, responses_server
from real_cli.scenarios import procs_under
from real_cli.tier import availability

from orcr_core.kit.testing import until

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.real_cli)


@pytest.fixture(scope="session")
def provider_bin() -> Path:
    folder, why = availability()
    assert folder is not None, why  # deselected before this when it cannot run
    return folder


class Real:
    """One test's orcr + multiplexer + fake model API + provider CLI."""

    def __init__(self, home, mux, bin_dir: Path, tmp: Path, stack: ExitStack, monkeypatch):
        self.home = home
        self.mux = mux
        self.bin = bin_dir
        self.tmp = tmp
        self.stack = stack
        self.monkeypatch = monkeypatch
        self.model = None  # the FakeServer
        self.provider = None
        self.cwd = tmp / "proj"
        self.cwd.mkdir()
        self.cli_home = tmp / "cli-home"
        self.cli_home.mkdir()
        self.timings: dict[str, str] = {}
        #: seconds ``wait_idle`` waits by default (a CLI slow to start raises it)
        self.idle_wait = 60

    # ---------------------------------------------------------------- setup
    def _start(self, provider: str, provider_toml: str, env: dict[str, str], extra: str) -> Real:
        """``extra``: more config; timings keys (``gc_after = "1s"``) go in ``self.timings``."""
        self.provider = provider
        # CI=true as CI services set it (the project's own CI does): a CLI that turns
        # headless on it (Gemini CLI does) must still run in its pane under orcr
        env = dict(env, HOME=str(self.tmp / "user"), CI="true")
        (self.tmp / "user").mkdir(exist_ok=True)
        for key in ("ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME",
                    "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "GEMINI_CLI_HOME",
                    "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GOOGLE_API_KEY"):  # fmt: skip
            self.monkeypatch.delenv(key, raising=False)
            self.home.env.pop(key, None)
        # herdr's panes inherit the test process's environment, tmux's the server's
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)
        self.home.env.update(env)
        self.home.config(
            self.mux.config()
            + '[timings]\npoll_every = "50ms"\n'
            + "".join(f'{k} = "{v}"\n' for k, v in self.timings.items())
            + f"[providers.{provider}]\n{provider_toml}"
            + extra
        )
        self.home.start_server()
        return self

    def claude(self, script: Script | None = None, extra: str = "", settings: dict | None = None,
               plan: bool = False):  # fmt: skip
        """Claude Code with a private CLAUDE_CONFIG_DIR: onboarding done, the fake key
        approved, the project folder trusted, permission mode ``default`` (a Bash call
        asks); ``settings`` replaces settings.json. ``plan``: logged in to a claude.ai
        plan instead (a ``.credentials.json`` with a fake OAuth token, no API key), as a
        usage limit's wait needs."""
        self.model = self.stack.enter_context(anthropic_server(script))
        cfg = self.cli_home
        if plan:
            token = {"accessToken": "sk-ant-oat01-fake", "refreshToken": "sk-ant-ort01-fake",
                     "expiresAt": int(time.time() * 1000) + 86_400_000,
                     "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}  # fmt: skip
            (cfg / ".credentials.json").write_text(json.dumps({"claudeAiOauth": token}))
        state = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [self.model.api_key[-20:]], "rejected": []},
            "projects": {
                str(self.cwd): {
                    # Claude Code 1.0.x crashes ("allowedTools is not iterable") on a
                    # project entry without it; its own entries always carry it
                    "allowedTools": [],
                    "hasTrustDialogAccepted": True,
                    "hasCompletedProjectOnboarding": True,
                }
            },
        }
        (cfg / ".claude.json").write_text(json.dumps(state))
        if settings is None:
            settings = {"permissions": {"defaultMode": "default"}, "disableAutoMode": "disable"}
        (cfg / "settings.json").write_text(json.dumps(settings))
        env = {
            "ANTHROPIC_BASE_URL": self.model.url,
            "ANTHROPIC_API_KEY": self.model.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        if plan:
            del env["ANTHROPIC_API_KEY"]
            self.monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
            self.home.env.pop("ANTHROPIC_API_KEY", None)
        toml = f'argv = ["{self.bin / "claude"}"]\nhome = "{cfg}"\nallow_unpinned = true\n'
        return self._start("claude", toml, env, extra)

    def codex(self, script: Script | None = None, extra: str = "", config: str = ""):
        """Codex with a private CODEX_HOME: the fake as its model provider, update check
        off, the project folder trusted; ``config`` adds top-level keys."""
        self.model = self.stack.enter_context(responses_server(script))
        home = self.cli_home
        (home / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "fake"\n'
            "check_for_update_on_startup = false\n"
            + config
            + '[model_providers.fake]\nname = "fake"\n'
            + f'base_url = "{self.model.url}/v1"\nwire_api = "responses"\n'
            + 'env_key = "FAKE_MODEL_API_KEY"\n'
            + f'[projects."{self.cwd}"]\ntrust_level = "trusted"\n'
        )
        env = {"FAKE_MODEL_API_KEY": self.model.api_key}
        toml = f'argv = ["{self.bin / "codex"}"]\nhome = "{home}"\nallow_unpinned = true\n'
        return self._start("codex", toml, env, extra)

    def pi(self, script: Script | None = None, extra: str = "", settings: dict | None = None):
        """pi with a private agent folder (``[providers.pi] home``, PI_CODING_AGENT_DIR):
        the fake Anthropic API as its model provider (``models.json``, ``anthropic-messages``)
        and that model the default (``settings.json``; ``settings`` adds keys), offline
        (``PI_OFFLINE``: no update check, no download of fd/ripgrep)."""
        self.model = self.stack.enter_context(anthropic_server(script))
        agent = self.cli_home
        fake = {"baseUrl": self.model.url, "api": "anthropic-messages",
                "apiKey": "FAKE_MODEL_API_KEY",
                "models": [{"id": "claude-fake", "name": "Fake", "contextWindow": 200000,
                            "maxTokens": 8192}]}  # fmt: skip
        (agent / "models.json").write_text(json.dumps({"providers": {"fake": fake}}))
        base = {"defaultProvider": "fake", "defaultModel": "claude-fake"}
        (agent / "settings.json").write_text(json.dumps(dict(base, **(settings or {}))))
        env = {"FAKE_MODEL_API_KEY": self.model.api_key, "PI_OFFLINE": "1"}
        toml = f'argv = ["{self.bin / "pi"}"]\nhome = "{agent}"\nallow_unpinned = true\n'
        return self._start("pi", toml, env, extra)

    def opencode(self, script: Script | None = None, extra: str = "", config: dict | None = None):
        """OpenCode with the fake as a custom OpenAI-compatible provider (an opencode.json
        given as ``[providers.opencode] config``), the models.dev fetch off; its data,
        config and cache under the test's HOME. ``config`` adds top-level keys
        (``{"permission": {"bash": "ask"}}``)."""
        self.model = self.stack.enter_context(chat_server(script))
        cfg = {
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {
                        "baseURL": f"{self.model.url}/v1",
                        "apiKey": "{env:FAKE_MODEL_API_KEY}",
                    },
                    "models": {"fake-chat": {"name": "Fake chat"}},
                }
            },
            "model": "fake/fake-chat",
            "autoupdate": False,
            "share": "disabled",
            **(config or {}),
        }
        path = self.cli_home / "opencode.json"
        path.write_text(json.dumps(cfg))
        env = {"FAKE_MODEL_API_KEY": self.model.api_key, "OPENCODE_DISABLE_MODELS_FETCH": "1"}
        # OpenCode 1.18 draws nothing for 20-70 s at load 10-35 on 2 cores (a few s idle)
        self.timings.setdefault("max_starting", "5m")
        self.idle_wait = 240
        toml = f'argv = ["{self.bin / "opencode"}"]\nconfig = "{path}"\nallow_unpinned = true\n'
        return self._start("opencode", toml, env, extra)

    def gemini(self, script: Script | None = None, extra: str = "", trusted: bool = True,
               settings: dict | None = None):  # fmt: skip
        """Gemini CLI with a private GEMINI_CLI_HOME: the API key as its auth method, the
        project folder trusted (``trusted``), no update check or usage statistics, two
        attempts per model request. orcr's settings file for the agent (its turn-end
        hook) goes in a folder Gemini CLI loads it from: not under /tmp (writable by
        others), so under the user's own home."""
        self.model = self.stack.enter_context(gemini_server(script))
        dot = self.cli_home / ".gemini"
        dot.mkdir()
        base = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                        "maxAttempts": 2},
            "privacy": {"usageStatisticsEnabled": False},
        }  # fmt: skip
        (dot / "settings.json").write_text(json.dumps(settings or base))
        if trusted:
            (dot / "trustedFolders.json").write_text(json.dumps({str(self.cwd): "TRUST_FOLDER"}))
        owner = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "orcr-real-cli"
        owner.mkdir(parents=True, exist_ok=True, mode=0o700)
        private = Path(tempfile.mkdtemp(prefix="gemini-", dir=owner))
        self.stack.callback(shutil.rmtree, private, True)
        env = {"GEMINI_API_KEY": self.model.api_key, "GOOGLE_GEMINI_BASE_URL": self.model.url}
        toml = (
            f'argv = ["{self.bin / "gemini"}"]\nhome = "{self.cli_home}"\n'
            f'settings_dir = "{private}"\nallow_unpinned = true\n'
        )
        return self._start("gemini", toml, env, extra)

    # ---------------------------------------------------------------- orcr
    def orcr(self, *args, check: bool = True, timeout: float = 60):
        return self.home.run(*args, check=check, timeout=timeout)

    def run(self, path: str, prompt: str, *opts: str, cwd: Path | None = None) -> str:
        """``agent run`` in the project folder (or ``cwd``): the agent's uuid."""
        r = self.orcr(
            "agent", "run", "--provider", self.provider, "--path", path,
            "--cwd", str(cwd or self.cwd), *opts, prompt,
        )  # fmt: skip
        return r.stdout.split()[1]

    def get(self, path: str) -> dict:
        return json.loads(self.orcr("agent", "get", path, "--json").stdout)

    def wait_idle(self, path: str, timeout: int | None = None) -> None:
        timeout = timeout or self.idle_wait
        r = self.orcr("agent", "wait", path, "--timeout", f"{timeout}s", check=False,
                      timeout=timeout + 30)  # fmt: skip
        assert (r.returncode, r.stdout.strip()) == (0, f"{path} idle"), self.why(path, r.stderr)

    def read(self, path: str) -> dict:
        return json.loads(self.orcr("agent", "read", path, "--json").stdout)

    def status(self, path: str) -> str:
        return self.get(path)["status"]

    def until_status(self, path: str, *statuses: str, timeout: float = 60) -> str:
        try:
            until(lambda: self.status(path) in statuses, timeout, f"{path} {'/'.join(statuses)}")
        except AssertionError as exc:
            raise AssertionError(self.why(path, f"{exc}; it is {self.status(path)}")) from None
        return self.status(path)

    def pane_pid(self, path: str) -> int:
        """The pid of the program in the agent's pane (the CLI: ``env`` execs it)."""
        if self.mux.kind != "tmux":
            return self.mux.emulator.pane(self.pane(path)).proc.pid
        res = subprocess.run(
            ["tmux", "-S", str(self.mux.socket), "display-message", "-p", "-t",
             self.pane(path), "#{pane_pid}"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return int(res.stdout.strip())

    # ---------------------------------------------------------------- the pane
    def pane(self, path: str) -> str:
        if self.mux.kind == "tmux":
            res = subprocess.run(
                ["tmux", "-S", str(self.mux.socket), "list-panes", "-a", "-F",
                 "#{pane_id}|#{@orcr_path}"],
                capture_output=True, text=True,
            )  # fmt: skip
            for line in res.stdout.splitlines():
                pane, _, label = line.partition("|")
                if label == path:
                    return pane
            raise AssertionError(f"no tmux pane labelled {path}: {res.stdout!r}")
        for p in self.mux.emulator.panes():
            if p.label == path:
                return p.pane_id
        raise AssertionError(f"no herdr pane labelled {path}")

    def screen(self, path: str) -> str:
        pane = self.pane(path)
        if self.mux.kind == "tmux":
            return subprocess.run(
                ["tmux", "-S", str(self.mux.socket), "capture-pane", "-p", "-t", pane],
                capture_output=True, text=True,
            ).stdout  # fmt: skip
        return self.mux.emulator.screen(pane)

    def keys(self, path: str, *keys: str) -> None:
        """What a person attached to the pane would type (tmux key names: Enter, Escape)."""
        if self.mux.kind == "tmux":
            subprocess.run(
                ["tmux", "-S", str(self.mux.socket), "send-keys", "-t", self.pane(path), *keys],
                check=True,
            )
            return
        raw = {"Enter": b"\r", "Escape": b"\x1b"}
        self.mux.emulator.pane(self.pane(path)).proc.write(b"".join(raw[k] for k in keys))

    def until_blocked(self, path: str, text: str, timeout: float = 30) -> dict:
        """The agent's row once its ``blocked`` reason holds ``text`` (else what the
        agent and its pane show)."""
        try:
            return until(
                lambda: (a := self.get(path))["blocked"] and text in a["blocked"] and a,
                timeout,
                f"{path} blocked on {text!r}",
            )
        except AssertionError as exc:
            raise AssertionError(self.why(path, f"{exc}; agent: {self.get(path)}")) from None

    def until_screen(self, path: str, text: str, timeout: float = 30) -> str:
        def shown():
            try:
                screen = self.screen(path)
            except AssertionError:  # no pane yet
                return None
            return screen if text in screen else None

        return until(shown, timeout, f"{text!r} on screen")

    def why(self, path: str, extra: str = "") -> str:
        """Everything a failing assertion should show."""
        try:
            screen = self.screen(path)
        except Exception as exc:  # noqa: BLE001 (diagnostics only)
            screen = f"(no screen: {exc})"
        reqs = [
            (r.method, r.path, r.prompt, r.answer)
            for r in (self.model.requests if self.model else [])
        ]
        transcripts = (
            sorted(
                str(p.relative_to(self.cli_home)) + ":\n" + p.read_text()[-3000:]
                for p in self.cli_home.rglob("*.jsonl")
                if "projects" in p.parts or "sessions" in p.parts or "chats" in p.parts
            )
            + [  # pi's session is in the agent's own data folder
                f"{p}:\n{p.read_text()[-3000:]}" for p in self.home.path.glob("agents/*/pi-*.jsonl")
            ]
        )
        if self.provider == "opencode":  # its session store: one database per agent
            from orcr_opencode import summarize

            for db in sorted(self.home.path.rglob("opencode.db")):
                transcripts.append(f"{db}:\n{json.dumps(summarize(str(db)))[-3000:]}")
        try:  # what orcr made of it: the agent's own events, as the store holds them
            uuid = self.get(path)["uuid"]
            events = "\n".join(
                f"{e['ts']} {e['kind']} {json.dumps(e['data'])[:300]}"
                for e in self.home.events(uuid)[-40:]
            )
        except Exception as exc:  # noqa: BLE001 (diagnostics only)
            events = f"(no events: {exc})"
        return (
            f"{extra}\n--- screen\n{screen}\n--- model requests\n{reqs}\n--- server log\n"
            f"{self.home.server_log()}\n--- orcr events\n{events}\n--- transcripts\n"
            + "\n".join(transcripts)
        )

    # ---------------------------------------------------------------- teardown
    def close(self) -> None:
        self.home.stop_server()
        self.home.kill_server()
        # the CLIs' own daemons (Codex's app-server) run binaries copied into their home
        for pid in procs_under(self.cli_home):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def real(live, short_tmp, provider_bin, monkeypatch):
    """orcr on a real multiplexer (``live``: tmux, or the herdr emulator), ready for
    ``.claude(script)``, ``.codex(script)`` or ``.opencode(script)``. Choose the multiplexer with
    ``@pytest.mark.parametrize("live", ["tmux"], indirect=True)``."""
    with ExitStack() as stack:
        r = Real(live, live.mux, provider_bin, short_tmp, stack, monkeypatch)
        try:
            yield r
        finally:
            r.close()
