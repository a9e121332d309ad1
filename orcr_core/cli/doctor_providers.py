"""``orcr doctor``'s provider rows: each provider CLI and its version range, the default
provider, and herdr's hook integrations."""

from __future__ import annotations

import os
import re
from pathlib import Path

from orcr_core.cli.doctor_mux import HERDR_INSTALL
from orcr_core.cli.doctor_probe import parse_version, run_version, which

#: where ``herdr integration install <name>`` puts its hook (reference ORCR-NOTES.md section 13)
INTEGRATIONS = {
    "claude": ("CLAUDE_CONFIG_DIR", "~/.claude", "hooks/herdr-agent-state.sh"),
    "codex": ("CODEX_HOME", "~/.codex", "herdr-agent-state.sh"),
}


class ProviderChecks:
    """Mixed into :class:`orcr_core.cli.doctor.Doctor` (its ``config``, ``registry``,
    ``driver_name``, ``cli_found`` and ``add``)."""

    # -- providers -----------------------------------------------------------------------
    def cli_providers(self) -> list[str]:
        """The installed providers that drive a CLI of their own (their ``cli``)."""
        return [n for n in sorted(self.registry.providers) if self._cli(n)]

    def _cli(self, name: str) -> tuple[str, str] | None:
        """``(the command run by default, how to install it)``, or None."""
        provider = self.registry.providers.get(name)
        cli = getattr(provider, "cli", None) if provider is not None else None
        if isinstance(cli, tuple) and len(cli) == 2 and all(isinstance(c, str) for c in cli):
            return cli
        return None

    def check_provider(self, name: str) -> None:
        from orcr_core.kit.versions import matches

        provider = self.registry.providers.get(name)
        if provider is None:
            return  # not installed as an adapter: nothing to run
        default, install = self._cli(name) or (name, f"install the {name} CLI")
        argv = self.config.provider_options(name).get("argv") or [default]
        program = argv[0] if isinstance(argv, list) else str(argv)
        found = which(program)
        self.cli_found[name] = found is not None
        check = f"{name} cli"
        if found is None:
            self.add(
                check,
                "warn",
                f"{program!r} not found on PATH; --provider {name} agents cannot start",
                f"{install}, or set [providers.{name}] argv",
            )
            return
        out, err = run_version(found)
        version = parse_version(out or "")
        if version is None:
            self.add(
                check,
                "warn",
                f"{found}: no version found ({err or out!r})",
                f"check that {found} --version works",
            )
            return
        spec = getattr(provider, "supported_versions", "")
        if matches(spec, version):
            self.add(check, "ok", f"{name} {version} at {found} (adapter supports {spec or 'any'})")
            return
        opts = self.config.provider_options(name)
        if opts.get("allow_unpinned"):
            self.add(
                check,
                "warn",
                f"{name} {version} at {found} is outside the adapter's range {spec}; "
                "runs degraded (allow_unpinned = true)",
                f"install a {name} version in {spec}, or upgrade orcr",
            )
            return
        self.add(
            check,
            "fail",
            f"{name} {version} at {found} is outside the adapter's range {spec}; "
            f"orcr ends its {name} agents failed (unsupported_provider_version)",
            f"install a {name} version in {spec}, upgrade orcr, or accept degraded runs: "
            f"orcr config set providers.{name}.allow_unpinned true",
        )

    def check_default_provider(self) -> None:
        name = self.config.get("agent.provider")
        check = "default provider"
        if name not in self.registry.providers:
            known = ", ".join(sorted(self.registry.providers)) or "none"
            self.add(
                check,
                "warn",
                f"agent.provider = {name!r} is not an installed provider: orcr agent run "
                "without --provider is refused",
                f"orcr config set agent.provider NAME (installed: {known})",
            )
        elif (cli := self._cli(name)) and not self.cli_found.get(name):
            program = (self.config.provider_options(name).get("argv") or [cli[0]])[0]
            self.add(
                check,
                "warn",
                f"{name} (agent.provider) needs the {program!r} CLI, which is not found: "
                f"orcr agent run without --provider starts agents that end failed",
                f"{cli[1]}, or choose another default: orcr config set agent.provider NAME",
            )
        else:
            self.add(check, "ok", f"{name} (agent.provider)")

    def check_integration(self, name: str) -> None:
        env_var, default, rel = INTEGRATIONS[name]
        home = self.config.provider_options(name).get("home")
        root = Path(os.path.expanduser(str(home or os.environ.get(env_var) or default)))
        hook = root / rel
        check = f"herdr {name} integration"
        if hook.is_file():
            m = re.search(r"HERDR_INTEGRATION_VERSION=\D*(\d+)", hook.read_text(errors="replace"))
            self.add(check, "ok", f"installed (v{m.group(1) if m else '?'}) at {hook}")
            return
        prefix = f"{env_var}={root} " if (home or os.environ.get(env_var)) else ""
        fix = f"{prefix}herdr integration install {name}"
        if name == "codex":
            why = "herdr reports Codex's thread id through it: without it orcr cannot find a codex transcript"
        else:
            why = "optional: orcr launches claude with --session-id, so it knows the session anyway"
        notify = self.config.provider_options(name).get("notify", True)
        if not self.cli_found.get(name):
            self.add(check, "ok", f"not installed ({hook} missing); {name} not found, not needed")
        elif name == "codex" and notify:
            self.add(
                check, "ok",
                f"not installed ({hook} missing); optional: orcr learns Codex's thread id "
                "through its notify program ([providers.codex] notify)",
            )  # fmt: skip
        elif name == "claude":
            self.add(check, "ok", f"not installed ({hook} missing); {why} ({fix})")
        elif self.driver_name not in (None, "herdr"):
            self.add(
                check,
                "warn",
                f"not installed ({hook} missing); codex agents need herdr and this integration: "
                f"under {self.driver_name} orcr cannot find a codex transcript, so their turns "
                "never end",
                f"{HERDR_INSTALL.split(', or use tmux')[0]}, then {fix}",
            )
        else:
            self.add(check, "warn", f"not installed ({hook} missing); {why}", fix)
