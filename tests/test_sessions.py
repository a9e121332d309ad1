"""Which session an agent follows when its process reports several (agents.sessions).

Codex reports its thread id after each turn and was seen naming two in a row, one
with no rollout file (issue 14). The row must follow the thread whose rollout
received the agent's prompt, whatever the order of the reports.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from orcr_codex import CodexProvider

from orcr_core.agents import sessions
from orcr_core.contracts import SessionPointer

PROMPT = 'fix the "parser", then run the tests'


class _Config:
    def __init__(self, home):
        self.home = home

    def provider_options(self, name):
        return {"home": str(self.home)}


def _server(tmp_path):
    agents = tmp_path / "agents"
    (agents / "u1").mkdir(parents=True)
    (agents / "u1" / "launch.json").write_text(json.dumps({"prompt": PROMPT}))
    return SimpleNamespace(
        registry=SimpleNamespace(providers={"codex": CodexProvider()}),
        config=_Config(tmp_path / "codex"),
        agents_dir=agents,
    )


def _agent(value=None):
    return SimpleNamespace(
        uuid="u1",
        path="x/a",
        cwd="/tmp",
        provider="codex",
        agent_session_source="orcr:codex-notify" if value else None,
        agent_session_kind="id" if value else None,
        agent_session_value=value,
        model=None,
        run_args=None,
    )


def _rollout(tmp_path, thread: str, prompt: str | None) -> None:
    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "session_meta", "payload": {"id": thread}}]
    if prompt is not None:
        lines.append({"type": "event_msg", "payload": {"type": "user_message", "message": prompt}})
    (day / f"rollout-2026-11-30T10-00-00-{thread}.jsonl").write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    )


def _ptr(thread: str) -> SessionPointer:
    return SessionPointer("orcr:codex-notify", "id", thread)


REAL, STRAY, OTHER = "019a-real", "019a-stray", "019a-other"


def test_the_first_report_is_taken(tmp_path):
    assert sessions.replaces(_server(tmp_path), _agent(), _ptr(STRAY))


@pytest.mark.parametrize(
    ("recorded", "reported", "expected"),
    [
        (REAL, STRAY, False),  # the real one first, then a thread with no rollout: kept
        (STRAY, REAL, True),  # the stray first: the real one (rollout, prompt) replaces it
        (OTHER, REAL, True),  # another rollout without the prompt: the prompt's one wins
        (REAL, OTHER, False),  # ... and never the other way round
    ],
)
def test_the_thread_whose_rollout_has_the_prompt_is_followed(
    tmp_path, recorded, reported, expected
):
    _rollout(tmp_path, REAL, PROMPT)
    _rollout(tmp_path, OTHER, "an unrelated prompt")
    server = _server(tmp_path)
    assert sessions.replaces(server, _agent(recorded), _ptr(reported)) is expected


def test_the_prompt_is_matched_as_the_transcript_writes_it(tmp_path):
    _rollout(tmp_path, REAL, PROMPT)
    path = next((tmp_path / "codex" / "sessions").rglob("*.jsonl"))
    assert sessions.holds_prompt(str(path), PROMPT)  # quotes are escaped in JSON
    assert not sessions.holds_prompt(str(path), "something else")


def test_concurrent_reports_never_leave_the_stray_thread(tmp_path, monkeypatch):
    """Two reports handled at once (issue 19 item 3): the stray one read the row
    before the real one was recorded. It must decide on the row as it is when it
    writes (compare-and-set inside the write transaction), so the session whose
    rollout exists stays recorded whatever the interleaving."""
    import threading
    import time

    from orcr_core.server import handlers
    from orcr_core.store import db as store_db
    from orcr_core.store.models import Agent

    _rollout(tmp_path, REAL, PROMPT)
    server = _server(tmp_path)
    server.notify = lambda **kw: None
    store_db.open_store(tmp_path / "store.db")
    try:
        Agent.create(
            uuid="u1",
            path="x/a",
            name="a",
            provider="codex",
            status="working",
            cwd="/tmp",
            launch_token="tok",
            created_at=time.time(),
        )
        stray_decides = threading.Event()
        real_done = threading.Event()
        decide = sessions.replaces

        def replaces(server, agent, pointer):
            if pointer.value == STRAY:  # the stray report decides slowly: the real one lands
                stray_decides.set()
                real_done.wait(2)
            return decide(server, agent, pointer)

        monkeypatch.setattr(sessions, "replaces", replaces)

        def report(thread):
            store_db.db.connect(reuse_if_open=True)
            try:
                params = {"uuid": "u1", "launch_token": "tok", "source": "orcr:codex-notify"}
                handlers.agent_report_session(
                    server, None, 1, dict(params, kind="id", value=thread)
                )
            finally:
                if thread == REAL:
                    real_done.set()
                store_db.db.close()

        stray = threading.Thread(target=report, args=(STRAY,))
        stray.start()
        assert stray_decides.wait(5)
        real = threading.Thread(target=report, args=(REAL,))
        real.start()
        real.join(10)
        stray.join(10)
        assert Agent.get(Agent.uuid == "u1").agent_session_value == REAL
    finally:
        store_db.db.close()


def test_a_thread_another_agent_took_meanwhile_is_not_recorded_twice(tmp_path, short_tmp):
    """Delivery and the monitor search for a thread by its prompt: two agents given the
    same prompt in the same folder can both find the newest rollout before either
    records it. The one that commits second must not take it too (a compare inside
    the write transaction), else both would read one agent's answers."""
    from orcr_core.store import db as store_db
    from orcr_core.store.models import Agent

    store_db.open_store(short_tmp / "store.db")
    try:
        import os
        import time

        day = tmp_path / "codex" / "sessions" / time.strftime("%Y/%m/%d")
        day.mkdir(parents=True)
        meta = {"type": "session_meta", "payload": {"id": REAL, "cwd": os.path.realpath("/tmp")}}
        said = {"type": "event_msg", "payload": {"type": "user_message", "message": PROMPT}}
        (day / f"rollout-x-{REAL}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in (meta, said))
        )
        server = _server(tmp_path)
        server.notify = lambda: None
        rows = {}
        for uuid, path in (("u1", "x/a"), ("u2", "x/b")):
            (tmp_path / "agents" / uuid).mkdir(parents=True, exist_ok=True)
            (tmp_path / "agents" / uuid / "launch.json").write_text(
                json.dumps({"prompt": PROMPT, "cwd": "/tmp"})
            )
            rows[uuid] = Agent.create(
                uuid=uuid, path=path, name=path[-1], provider="codex", status="working",
                queue_seq=1, cwd="/tmp", created_at=0.0, started_at=0.0,
            )  # fmt: skip

        class Racing(CodexProvider):
            """The other agent records the thread between this search and its commit."""

            def find_session(self, spec, prompt, since, taken=frozenset()):
                found = super().find_session(spec, prompt, since, taken)
                Agent.update(agent_session_source="orcr:rollout", agent_session_kind="id",
                             agent_session_value=REAL).where(Agent.uuid == "u2").execute()  # fmt: skip
                return found

        server.registry.providers["codex"] = Racing()
        assert sessions.discover(server, rows["u1"]) is False
        assert Agent.get(Agent.uuid == "u1").agent_session_value is None
        Agent.update(agent_session_value=None).where(Agent.uuid == "u2").execute()
        server.registry.providers["codex"] = CodexProvider()
        server._session_scans = {}
        assert sessions.discover(server, rows["u1"]) is True  # found when nobody holds it
        assert Agent.get(Agent.uuid == "u1").agent_session_value == REAL
    finally:
        store_db.close_store()


def test_holders_names_the_agent_whose_process_holds_the_transcript(tmp_path):
    """A rollout another agent's process holds open is that agent's (issue 33 item 7):
    ``holders`` reads the holder's ``ORCR_ID`` and open files from /proc. Planted:
    ``holders`` returning set() -> fails (and test_codex_same_prompt fails)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "rollout.jsonl"
    path.write_text("{}\n")
    code = "import sys; f = open(sys.argv[1]); print('open', flush=True); sys.stdin.read()"
    env = dict(os.environ, ORCR_ID="agent-b")
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline() == "open\n"
        assert sessions.holders(str(path), {"agent-a", "agent-b"}) == {"agent-b"}
        assert sessions.holders(str(path), {"agent-a"}) == set()  # not a live agent
        assert sessions.holders(str(tmp_path / "other"), {"agent-b"}) == set()
    finally:
        p.communicate("")


def test_concurrent_session_searches_share_one_pass_over_proc(monkeypatch):
    """24 agents given one prompt search at once, each skipping up to 8 rollouts other
    agents hold: one pass over /proc per candidate was 1-1.5 s each at load 80, so a
    delivering agent's search took ~10 s, its Enter was never confirmed in time, and
    test_codex_same_prompt timed out (issue 33 item 15). A holder found in a shared
    pass within ``OPEN_FILES_TTL`` is trusted; "nobody holds it" (the search then takes
    the rollout) is read by the call's own pass, as before. Planted: ``open_files``
    scanning on every call -> fails. Planted: a shared pass's "nobody"
    trusted -> fails (and test_codex_same_prompt's agents took others' rollouts)."""
    import threading
    import time

    passes, own = [], []
    monkeypatch.setattr(sessions, "_open_files", (time.monotonic(), {}))  # before /r opened
    monkeypatch.setattr(sessions, "_scan_open_files", lambda: passes.append(1) or {"b": {"/r"}})
    monkeypatch.setattr(sessions, "_holders_now", lambda path, among: own.append(path) or {"b"})
    assert sessions.holders("/r", {"b"}, sessions.OPEN_FILES_TTL) == {"b"}
    assert (passes, own) == ([], ["/r"])  # "nobody" in the shared pass: its own pass
    monkeypatch.setattr(sessions, "_open_files", (-1e9, {}))
    own.clear()

    def search() -> None:
        for _ in range(8):
            assert sessions.holders("/r", {"b"}, sessions.OPEN_FILES_TTL) == {"b"}

    threads = [threading.Thread(target=search) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= len(passes) <= 2 and own == [], (len(passes), len(own))
    sessions.holders("/r", {"b"})  # the report path: its own pass
    assert own == ["/r"]
