"""Activities (orcr_core/kit/activities.py): what a process that is not an agent (a
lander) shows in ``orcr top``, and how a dead one's file is told and removed. The
end-to-end check, a real lander in ``orcr top --once``, is
plugins/tasks/tests/test_tasks_land.py::test_orcr_top_shows_the_lander_with_its_queue_task_and_step."""

from __future__ import annotations

import json
import os
import subprocess

from orcr_core.kit.activities import Activity, activities_dir, activity_line, read_activities
from orcr_core.top.text import format_frame


def test_an_activity_is_shown_while_its_process_lives_and_goes_with_it(tmp_path, monkeypatch):
    """Planted: the start time not compared (a pid alone) -> the reused pid's file is
    shown, fails; dead files not removed -> fails."""
    monkeypatch.setenv("ORCR_HOME", str(tmp_path))
    with Activity("lander", "demo", onto="main", task="T3", step="check") as act:
        act.update(counts={"landed": 2, "failed": 1})
        [a] = read_activities()
        assert (a["task"], a["step"], a["pid"]) == ("T3", "check", os.getpid())
        line = activity_line(a)
        assert line == f"lander demo → main: T3 check · landed 2, failed 1 · pid {os.getpid()}"
        frame = {"header": {"queue_depth": 0, "live": 0, "providers": {}}, "groups": []}
        assert line in format_frame({**frame, "activities": [a]}).splitlines()
        # a lander killed outright leaves its file: a dead pid, and a live pid that is
        # another process now (its start time differs), are both skipped and removed
        dead = subprocess.Popen(["true"])
        dead.wait()
        for name, pid, started in (("dead", dead.pid, None), ("reused", os.getpid(), 1.0)):
            (activities_dir() / f"lander-{name}-{pid}.json").write_text(
                json.dumps({"kind": "lander", "name": name, "pid": pid, "pid_started": started})
            )
        assert [a["name"] for a in read_activities()] == ["demo"]
        assert sorted(p.name for p in activities_dir().iterdir()) == [act.path.name]
    assert read_activities() == [] and not act.path.exists()
    idle = activity_line({"kind": "lander", "name": "q", "onto": "main", "pid": 7})
    assert idle == "lander q → main: idle · pid 7"
