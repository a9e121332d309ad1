"""What an agent is launched with: its spec, argv and env, and its pane reference.

Shared by the pipeline (which starts agents), the monitor and the handlers
(which read and address them).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orcr_core import dirs
from orcr_core.contracts import LaunchSpec, PaneInfo, PaneRef, SessionPointer
from orcr_core.store.models import Agent

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def pane_of(agent: Agent) -> PaneRef | None:
    """The agent's recorded pane, with the marks it must carry to be closed."""
    if not agent.pane_id:
        return None
    return PaneRef(
        agent.workspace_id or "",
        agent.tab_id or "",
        agent.pane_id,
        instance=dirs.instance_id(),
        launch_token=agent.launch_token,
    )


def owned(snapshot: list[PaneInfo]) -> dict[str, PaneInfo]:
    """This instance's panes in a snapshot, by launch token: the only panes orcr
    matches to its rows or ever closes. Panes of other instances (a shared
    multiplexer server) and panes with no marks are not in it."""
    me = dirs.instance_id()
    return {p.launch_token: p for p in snapshot if p.instance == me and p.launch_token}


def ref_of(pane: PaneInfo) -> PaneRef:
    """A snapshot pane as a reference that still carries its marks."""
    return PaneRef(
        pane.workspace_id,
        pane.tab_id,
        pane.pane_id,
        instance=pane.instance,
        launch_token=pane.launch_token,
    )


def launch_info(server: ServerContext, agent: Agent) -> dict:
    with open(server.agents_dir / agent.uuid / "launch.json") as f:
        return json.load(f)


def launch_spec(server: ServerContext, agent: Agent, launch: dict | None = None) -> LaunchSpec:
    launch = launch or launch_info(server, agent)
    options = server.config.provider_options(agent.provider)
    if launch.get("argv"):
        options["argv"] = list(launch["argv"])
    # per-run options (agent run --model/--arg) over [providers.<name>]: the row's,
    # so a resumed agent runs with what it was started with
    if agent.model:
        options["model"] = agent.model
    if agent.run_args:
        options["extra_args"] = [*options.get("extra_args", []), *json.loads(agent.run_args)]
    return LaunchSpec(
        uuid=agent.uuid,
        path=agent.path,
        cwd=agent.cwd,
        data_dir=str(server.agents_dir / agent.uuid),
        options=options,
    )


def launch_command(
    provider,
    spec: LaunchSpec,
    agent: Agent,
    resume: bool = False,
    sandbox: dict | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The agent's argv and env: orcr's identity variables, then the provider's.

    With ``resume``, the argv is the provider's ``resume_argv`` for the session
    the row records (``orcr agent resume``).

    Variables a provider removes (``None`` values) are unset with ``env -u``
    in front of the argv, since a multiplexer only adds variables; still no shell.

    With ``sandbox`` (the policy launch.json records) the argv runs inside it
    (orcr_core/sandbox): the launcher, bubblewrap, then the argv above.
    """
    if resume:
        pointer = SessionPointer(
            agent.agent_session_source or "", agent.agent_session_kind or "id",
            agent.agent_session_value or "",
        )  # fmt: skip
        argv = list(provider.resume_argv(spec, pointer))
    else:
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
    if sandbox:
        from orcr_core.sandbox import policy

        argv = policy.wrap(sandbox, provider, spec, argv, env)
    return argv, env
