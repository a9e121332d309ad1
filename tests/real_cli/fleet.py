"""The fleet tier's helpers: real Claude Code and Codex TUIs at once under one orcr.

:func:`start` points one orcr server at both CLIs, each with its own fake model API
(``real.model`` is Claude's, :attr:`Fleet.codex` Codex's), sharing ``real.cwd`` and
``real.cli_home`` (Claude's config dir and ``CODEX_HOME`` are the same folder: their
files do not overlap). :func:`replay` checks the caps and FIFO order from the event
log; :class:`Figures` measures what the fleet costs (RSS per TUI, server CPU).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

import psutil
from fake_models import Script, anthropic_server, responses_server

CLAUDE, CODEX = "claude", "codex"


@dataclass
class Fleet:
    real: object
    claude: object  # the Anthropic fake (also real.model)
    codex: object  # the Responses fake

    def model(self, provider: str):
        return self.claude if provider == CLAUDE else self.codex


def start(
    real,
    claude: Script,
    codex: Script,
    extra: str = "",
    settings: dict | None = None,
    codex_config: str = "",
    table: str = "",
) -> Fleet:
    """One orcr server running both CLIs, each against its fake (no dialog appears).
    ``settings`` replaces Claude Code's settings.json, ``codex_config`` adds top-level
    keys to Codex's config.toml, ``table`` adds keys to both ``[providers.*]`` tables."""
    anth = real.stack.enter_context(anthropic_server(claude))
    resp = real.stack.enter_context(responses_server(codex))
    real.model = anth
    home = real.cli_home
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [anth.api_key[-20:]], "rejected": []},
        "projects": {
            str(real.cwd): {
                "allowedTools": [],
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
            }
        },
    }
    (home / ".claude.json").write_text(json.dumps(state))
    if settings is None:
        settings = {"permissions": {"defaultMode": "default"}, "disableAutoMode": "disable"}
    (home / "settings.json").write_text(json.dumps(settings))
    (home / "config.toml").write_text(
        'model = "gpt-5-codex"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n'
        + codex_config
        + f'[model_providers.fake]\nname = "fake"\nbase_url = "{resp.url}/v1"\n'
        'wire_api = "responses"\nenv_key = "FAKE_MODEL_API_KEY"\n'
        f'[projects."{real.cwd}"]\ntrust_level = "trusted"\n'
    )
    env = {
        "ANTHROPIC_BASE_URL": anth.url,
        "ANTHROPIC_API_KEY": anth.api_key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "FAKE_MODEL_API_KEY": resp.api_key,
    }

    def keys(name: str) -> str:
        return f'argv = ["{real.bin / name}"]\nhome = "{home}"\nallow_unpinned = true\n' + table

    real._start(CLAUDE, keys(CLAUDE), env, f"[providers.{CODEX}]\n{keys(CODEX)}" + extra)
    real.provider = None  # both: Real.run would pick one
    return Fleet(real, anth, resp)


def run(real, provider: str, path: str, prompt: str) -> str:
    r = real.orcr(
        "agent", "run", "--provider", provider, "--path", path, "--cwd", str(real.cwd), prompt
    )
    return r.stdout.split()[1]


# ------------------------------------------------------------------ caps from the log


def replay(events: list[dict], cap: int, caps: dict[str, int]) -> list[str]:
    """Replay the event log: no promotion past the global or its provider's cap, and
    each promotion the oldest queued row of its provider (a freed slot never goes to a
    later row of the same provider). Returns the promoted agents in order."""
    queued: dict[str, tuple[int, str]] = {}  # uuid -> (queue order, provider)
    live: dict[str, str] = {}
    order, n = [], 0
    for ev in events:
        d = ev["data"]
        if ev["kind"] == "agent.queued":
            n += 1
            queued[ev["agent"]] = (n, d["provider"])
        elif ev["kind"] == "agent.status" and d["to"] == "queued":  # resumed: queued again
            n += 1
            queued[ev["agent"]] = (n, d["provider"])
        elif ev["kind"] == "agent.status" and d["to"] == "starting":
            seq, prov = queued.pop(ev["agent"])
            counts: dict[str, int] = {}
            for p in live.values():
                counts[p] = counts.get(p, 0) + 1
            assert len(live) < cap, f"global cap {cap} exceeded at seq {ev['seq']}"
            assert counts.get(prov, 0) < caps[prov], f"{prov} cap exceeded at seq {ev['seq']}"
            older = [s for s, p in queued.values() if p == prov and s < seq]
            assert not older, f"a later {prov} row promoted at seq {ev['seq']} before {older}"
            live[ev["agent"]] = prov
            order.append(ev["agent"])
        elif ev["kind"] == "agent.status" and d["to"] in ("ended", "lost"):  # lost: no slot
            live.pop(ev["agent"], None)
            queued.pop(ev["agent"], None)
    return order


# ------------------------------------------------------------------ figures


def tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, anonymous RSS) in bytes of ``pid`` and its descendants."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    rss = anon = 0
    for p in procs:
        try:
            m = p.memory_info()
        except psutil.Error:
            continue
        rss += m.rss
        anon += m.rss - m.shared
    return rss, anon


@dataclass
class Figures:
    """What the fleet costs, for docs/providers/real-cli.md (``ORCR_FLEET_FIGURES``)."""

    server_pid: int
    samples: list[tuple[float, float]] = field(default_factory=list)  # (t, cpu seconds)
    data: dict = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _phase: tuple[str, float] | None = None

    def phase(self, name: str) -> None:
        """Time the scenario's phases (``phase_seconds``): where the tier's minutes go."""
        now = time.monotonic()
        if self._phase is not None:
            done, began = self._phase
            self.data.setdefault("phase_seconds", {})[done] = round(now - began, 1)
        self._phase = (name, now)

    def burst_begins(self) -> None:
        """Sample the server's CPU twice a second until :meth:`burst_ends`."""

        def sample():
            while not self._stop.wait(0.5):
                try:
                    t = psutil.Process(self.server_pid).cpu_times()
                except psutil.Error:
                    return
                self.samples.append((time.monotonic(), t.user + t.system))

        self.samples.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def burst_ends(self, name: str) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        s = self.samples
        if len(s) < 3:
            return
        mean = (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0])
        peak = max((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(s, s[1:], strict=False))
        self.data[name] = {
            "seconds": round(s[-1][0] - s[0][0], 1),
            "server_cpu_mean_pct": round(100 * mean, 1),
            "server_cpu_peak_pct": round(100 * peak, 1),
        }

    def tuis(self, real, paths_by_provider: dict[str, list[str]]) -> None:
        """RSS of each live agent's pane tree, and the server's own."""
        out = {}
        for provider, paths in paths_by_provider.items():
            rows = [tree_memory(real.pane_pid(p)) for p in paths]
            out[provider] = {
                "n": len(rows),
                "rss_mib": [round(r / 2**20) for r, _ in rows],
                "anon_mib": [round(a / 2**20) for _, a in rows],
            }
        out["server_rss_mib"] = round(psutil.Process(self.server_pid).memory_info().rss / 2**20)
        self.data["tuis"] = out

    def save(self) -> None:
        self.phase("end")
        self.data["load_average"] = [round(x, 2) for x in os.getloadavg()]
        self.data["cpus"] = os.cpu_count()
        target = os.environ.get("ORCR_FLEET_FIGURES")
        print("fleet figures:", json.dumps(self.data))
        if target:
            with open(target, "w") as f:
                json.dump(self.data, f, indent=1)
