"""What an agent is launched with: its spec, argv and env, and its pane reference.

Shared by the pipeline (which starts agents), the monitor and the handlers
(which read and address them).
"""

from __future__ import annotations

import json

from orcr_core import dirs
from orcr_core.contracts import LaunchSpec, PaneRef
from orcr_core.store.models import Agent


def pane_of(agent: Agent) -> PaneRef | None:
    if not agent.pane_id:
        return None
    return PaneRef(agent.workspace_id or "", agent.tab_id or "", agent.pane_id)


def launch_info(server, agent: Agent) -> dict:
    with open(server.agents_dir / agent.uuid / "launch.json") as f:
        return json.load(f)


def launch_spec(server, agent: Agent, launch: dict | None = None) -> LaunchSpec:
    launch = launch or launch_info(server, agent)
    options = server.config.provider_options(agent.provider)
    if launch.get("argv"):
        options["argv"] = list(launch["argv"])
    return LaunchSpec(
        uuid=agent.uuid,
        path=agent.path,
        cwd=agent.cwd,
        data_dir=str(server.agents_dir / agent.uuid),
        options=options,
    )


def launch_command(provider, spec: LaunchSpec, agent: Agent) -> tuple[list[str], dict[str, str]]:
    """The agent's argv and env: orcr's identity variables, then the provider's.

    Variables a provider removes (``None`` values) are unset with ``env -u``
    in front of the argv, since a multiplexer only adds variables; still no shell.
    """
    argv = list(provider.launch_argv(spec))
    env = {
        "ORCR_ID": agent.uuid,
        "ORCR_PATH": agent.path,
        "ORCR_LAUNCH_TOKEN": agent.launch_token,
        "ORCR_SOCKET": str(dirs.socket_path()),
    }
    extra = getattr(provider, "launch_env", None)
    unset: list[str] = []
    for key, value in (extra(spec) if extra else {}).items():
        if key.startswith("ORCR_"):
            continue  # orcr's identity is not the provider's to change
        if value is None:
            unset.append(key)
        else:
            env[key] = value
    if unset:
        argv = ["env", *(a for k in unset for a in ("-u", k)), "--", *argv]
    return argv, env
