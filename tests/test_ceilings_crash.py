"""A SIGKILL of the server at each ceilings step, then a restart (issue 35 item 7):
no agent is left outside its group and no group is left behind. One suite over
the backends whose groups the server makes itself:

* ``cgroup_v1``: the real kernel here (root, v1 controllers read-write);
* ``cgroup_v2``: a real server pointed at a :class:`~orcr_core.ceilings.mimic.MimicFs`
  tree (``ORCR_CGROUP_V2_ROOT``), never a real kernel. The first server starts in
  the delegated group and moves itself into its leaf; the next one starts in that
  leaf, where the crashed one left its shell (or where ``DelegateSubgroup=orcr-server``
  puts a service): a group that enables controllers cannot take a new process.

The points (``ORCR_FAULT``, docs/internals.md): v2's own steps (``v2_server_leaf``,
the server moved into its leaf; ``v2_controllers``, memory/pids/cpu enabled for the
delegated group's children; ``v2_fleet``, the fleet group made; ``v2_group``, the
agent's group made, its ceilings not yet written), then both backends' ``after_group``
(the ceilings written), ``after_start`` (the pane started through the launch step: the
agent joins) and ``group_removed`` (an ended agent's group removed; v1: the first of its
three controllers' groups).

Planted bugs, each seen to fail here:
* ``step.release`` and ``step.sweep`` both no-ops -> fails for both backends (the
  groups stay: v1 at ``after_group``, v2 at ``v2_server_leaf``; either alone removes
  the crashed agent's own groups at these points).
* v2 ``sweep`` a no-op (the reconciliation pass not removing a v2 group left by a
  crash) -> fails for cgroup_v2 at ``v2_fleet``, the first point with a fleet (the left
  group stays).
* v2 ``ensure_fleet`` enabling the fleet's controllers only when it makes the fleet's
  group -> fails for cgroup_v2 at ``v2_fleet`` (the restarted server makes the agent's
  group without its controller files: the start fails ENOENT, the next agent never joins).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid as uuidlib
from pathlib import Path

import pytest

from orcr_core.ceilings import v1
from orcr_core.ceilings.cgroupfs import MIMIC_MARKER
from orcr_core.ceilings.mimic import MimicFs
from orcr_core.kit.testing import until
from orcr_core.sdk.client import ServerError

START = "/user.slice/user-0.slice/user@0.service/app.slice/orcr.service"
LEAF = START + "/orcr-server"
BOTH = ("after_group", "after_start", "group_removed")
POINTS = {
    "cgroup_v1": BOTH,
    "cgroup_v2": ("v2_server_leaf", "v2_controllers", "v2_fleet", "v2_group", *BOTH),
}


def _instance(home) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "from orcr_core import dirs; print(dirs.instance_id())"],
        env=home.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip()


class _V1:
    def __init__(self, tmp: Path, home) -> None:
        why = v1.unusable()
        if why and os.environ.get("CI"):
            pytest.fail(f"CI must run the cgroup tests on the real kernel: {why}")
        if why:
            pytest.skip(f"no writable cgroup v1 controllers here: {why}")
        self.env: dict = {}
        self.fleet = f"orcr-{_instance(home)}"  # other tests' fleets share the hierarchy

    def fresh(self, point: str) -> None:
        pass  # the real hierarchy, shared by every point

    def restarted(self) -> None:
        pass

    def groups(self, uuid: str | None = None) -> list[str]:
        """This server's agents' groups (``uuid``'s only, if given)."""
        found = []
        for c in v1.CONTROLLERS:
            base = v1.ROOT / c / v1.own(c).lstrip("/")
            found += [str(p) for p in base.glob(f"{self.fleet}/{uuid or '*-*-*-*-*'}")]
        return found

    def members(self, uuid: str) -> list[str]:
        g = [p for p in self.groups(uuid) if "/memory/" in p]
        return (Path(g[0]) / "cgroup.procs").read_text().split() if g else []

    def violations(self) -> list[str]:
        return []  # the real kernel refuses what it does not allow


class _V2:
    def __init__(self, tmp: Path, home) -> None:
        self.tmp = tmp

    def fresh(self, point: str) -> None:
        self.tree = self.tmp / f"cg-{point}"
        self.fs = MimicFs.make(self.tree, START)
        self.env = {"ORCR_CGROUP_V2_ROOT": str(self.tree)}

    def restarted(self) -> None:
        """The next server starts in the leaf, not in the delegated group. Where the
        fleet was made, an empty group of an agent whose row is gone sits in it too,
        as a crash between an agent's end and its group's removal leaves one: only
        the sweep (at the server's start and each reconciliation pass) removes it."""
        marker = self.tree / MIMIC_MARKER
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({**data, "start": LEAF}))
        for fleet in self._fleets():
            self.fs.mkdir(f"{fleet}/{uuidlib.uuid4()}")

    def _fleets(self) -> list[str]:
        return [f"{START}/{k}" for k in self.fs.children(START) if k != "orcr-server"]

    def groups(self, uuid: str | None = None) -> list[str]:
        return [f"{f}/{k}" for f in self._fleets() for k in self.fs.children(f) if k == (uuid or k)]

    def members(self, uuid: str) -> list[str]:
        g = self.groups(uuid)
        return self.fs.read(g[0], "cgroup.procs").split() if g else []

    def violations(self) -> list[str]:
        return self.fs.check()


def _crash(home, h, point: str) -> str:
    """The server SIGKILLed at ``point`` on an agent's way in (or out): its uuid."""
    home.start_server(extra_env={**h.env, "ORCR_FAULT": point})
    with home.sdk() as o:
        a = o.run(None, provider="command", path=f"k/{point}", argv=["sleep", "300"], cwd="/")
        if point == "group_removed":  # the agent runs in its group, then ends
            until(lambda: h.members(a["uuid"]), 30, "the agent to join its group")
            try:
                o.kill(f"k/{point}")
            except ServerError as exc:  # the server died answering it
                assert exc.code == "connection_closed", exc
    home.proc.wait(30)
    assert home.proc.returncode == -signal.SIGKILL, point
    return a["uuid"]


@pytest.mark.parametrize("mechanism", ["cgroup_v1", "cgroup_v2"])
def test_sigkill_at_each_ceiling_step_leaves_no_group_behind(orcr_home, tmp_path, mechanism):
    """At each point: the server SIGKILLed there; the next server ends the agent (a
    start it fails, closing its pane, or the kill it finishes) and removes its group
    (which the kernel refuses while a process is in it); a new agent then runs inside
    its own group, which goes when it ends; no group is left, and the server is not
    inside a group that enables controllers."""
    h = (_V1 if mechanism == "cgroup_v1" else _V2)(tmp_path, orcr_home)
    sock = orcr_home.path / "tmux.sock"
    orcr_home.config(
        f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n'
        '[timings]\nreconcile_every = "500ms"\n'
    )  # an ended agent's group goes at its end, or at the next pass once its process is gone
    try:
        for point in POINTS[mechanism]:
            h.fresh(point)
            uuid = _crash(orcr_home, h, point)
            if point in ("v2_group", "after_group", "after_start") or mechanism == "cgroup_v1":
                assert h.groups(uuid), point  # made (v1: or partly removed) before the crash
            h.restarted()
            orcr_home.start_server(extra_env=h.env)
            with orcr_home.sdk() as o:
                until(lambda: o.get(uuid)["status"] == "ended", 30, f"{point}: the end")  # noqa: B023
                until(lambda: not h.groups(uuid), 30, f"{point}: its groups to go")  # noqa: B023
                a = o.run(None, provider="command", path=f"k/{point}/next", argv=["sleep", "300"],
                          cwd="/")  # fmt: skip
                until(lambda: h.members(a["uuid"]), 30, f"{point}: the next agent inside")  # noqa: B023
                o.kill(f"k/{point}/next")
            until(lambda: not h.groups(), 30, f"{point}: its group to go")
            assert h.violations() == [], point
            orcr_home.stop_server()
    finally:
        orcr_home.kill_server()
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        orcr_home.reap()
