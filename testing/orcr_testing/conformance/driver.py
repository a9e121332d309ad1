"""The multiplexer driver suite: one class every driver's tests subclass (River's way).

A driver package runs it by subclassing :class:`DriverSuite` and giving a
``make_driver`` fixture: a callable that returns a fresh driver object (remembering
nothing, as after orcr restarts) on a running multiplexer of the test's own::

    from orcr_testing.conformance import DriverSuite

    class TestMyDriver(DriverSuite):
        @pytest.fixture
        def make_driver(self, short_tmp):
            mux = start_my_multiplexer(short_tmp)      # stopped by the fixture after
            yield lambda: MyDriver(config_for(mux))
            mux.stop()

What is checked, through the :class:`~orcr_core.contracts.Driver` contract only:
ensure_workspace is idempotent and safe from several threads at once; a new driver
finds the workspace and its labelled panes again; ``snapshot`` reports each pane
where ``start`` put it and ``read`` shows its screen; the instance and launch-token
marks are reported by ``snapshot`` and guard every ``close``; ``close`` is
idempotent; a prompt by the two-call rule (``send_prompt``) and by paste then submit
(:class:`~orcr_core.contracts.SplitPrompt`) arrives exactly once; a pane id that now
names another agent's pane (multiplexers hand ids out again after a restart) is
never typed into; a pane parks and comes back with its label, marks and process,
and a pane without the marks is not moved (:class:`~orcr_core.contracts.Parking`);
and the pane's process is reported (:class:`~orcr_core.contracts.PaneProcesses`).
A capability the driver lacks is skipped, naming it. docs/plugins/conformance.md.

A test's docstring names the bug planted in a bundled driver to see it fail.
"""

from __future__ import annotations

import os
import sys
import threading

import pytest

from orcr_core.contracts import (
    PARKING,
    Driver,
    DriverError,
    PaneInfo,
    PaneProcesses,
    PaneRef,
    Parking,
    SplitPrompt,
    StartSpec,
)
from orcr_core.kit.testing import alive, until

#: a line-mode "agent": prints ``GOT:<line>`` for each line submitted with Enter
LINE_AGENT = (
    sys.executable,
    "-u",
    "-c",
    "import sys\nprint('READY')\nfor line in sys.stdin: print('GOT:' + line.strip())",
)


class DriverSuite:
    """The multiplexer driver contract; subclass it with a ``make_driver`` fixture."""

    @pytest.fixture
    def driver(self, make_driver):
        return make_driver()

    def start(self, driver, ws: str, label: str = "suite/one", **marks) -> PaneRef:
        spec = StartSpec(ws, label, "/tmp", LINE_AGENT, {"ORCR_ID": "u1"}, **marks)
        ref = driver.start(spec)
        until(lambda: "READY" in driver.read(ref), what=f"{label} drawn")
        return ref

    def labelled(self, driver) -> dict[str, PaneInfo]:
        panes = [p for p in driver.snapshot() if p.label]
        assert len({p.label for p in panes}) == len(panes), f"a pane twice: {panes}"
        return {p.label: p for p in panes}

    @staticmethod
    def marked(ref: PaneRef, instance: str | None, token: str | None) -> PaneRef:
        """``ref`` as orcr names it from the agent's row: with its marks."""
        return PaneRef(ref.workspace_id, ref.tab_id, ref.pane_id, instance, token)

    def test_is_a_driver(self, driver):
        assert isinstance(driver, Driver), f"{driver!r} lacks a Driver method"
        assert isinstance(driver.name, str) and driver.name
        assert isinstance(driver.handshake(), dict)

    def test_ensure_workspace_is_idempotent_and_concurrent(self, driver):
        results: list[str] = []
        errors: list[BaseException] = []

        def one():
            try:
                results.append(driver.ensure_workspace("same"))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(set(results)) == 1 and len(results) == 6, results
        assert driver.ensure_workspace("same") == results[0]
        assert driver.ensure_workspace("other") != results[0]

    def test_found_again_by_label_by_a_new_driver(self, driver, make_driver):
        ws = driver.ensure_workspace("suite")
        ref = self.start(driver, ws)
        again = make_driver()  # orcr restarted: nothing remembered
        assert again.ensure_workspace("suite") == ws
        assert self.labelled(again)["suite/one"].pane_id == ref.pane_id
        assert "READY" in again.read(ref)

    def test_marks_are_reported_and_guard_every_close(self, driver):
        ws = driver.ensure_workspace("suite")
        ref = self.start(driver, ws, instance="i1", launch_token="t1")
        pane = self.labelled(driver)["suite/one"]
        assert (pane.instance, pane.launch_token) == ("i1", "t1")
        for instance, token in (("i2", "t1"), ("i1", "t2"), ("i1;x", "t1")):
            driver.close(self.marked(ref, instance, token))
            assert "suite/one" in self.labelled(driver), f"closed with marks {instance},{token}"
        driver.close(PaneRef(ref.workspace_id, ref.tab_id, ref.pane_id, "i1", "t1"))
        assert "suite/one" not in self.labelled(driver)

    def test_close_is_idempotent(self, driver):
        ws = driver.ensure_workspace("suite")
        keep = self.start(driver, ws, label="suite/keep")
        gone = self.start(driver, ws, label="suite/gone")
        driver.close(gone)
        driver.close(gone)  # already gone: not an error
        assert sorted(self.labelled(driver)) == ["suite/keep"]
        assert self.labelled(driver)["suite/keep"].pane_id == keep.pane_id

    def test_snapshot_reports_each_pane_and_read_shows_its_screen(self, driver):
        """Planted: tmux ``list-panes -s`` (the current session only) for ``-a`` -> fails;
        herdr's snapshot giving a pane its workspace's id as tab id -> fails."""
        one = self.start(driver, driver.ensure_workspace("suite"), label="suite/one")
        two = self.start(driver, driver.ensure_workspace("other"), label="other/two")
        panes = self.labelled(driver)
        assert sorted(panes) == ["other/two", "suite/one"]
        for label, ref in (("suite/one", one), ("other/two", two)):
            pane = panes[label]
            assert (pane.workspace_id, pane.tab_id, pane.pane_id) == (
                ref.workspace_id,
                ref.tab_id,
                ref.pane_id,
            ), label
            assert not pane.dead and not pane.parked, label
        assert one.workspace_id != two.workspace_id
        driver.send_prompt(two, "é ✓ $HOME")
        screen = until(lambda: (s := driver.read(two)) and "GOT:" in s and s, what="the reply")
        # the visible screen, top first (python -u writes READY and its newline apart:
        # the echo of the prompt can land between them)
        assert screen.splitlines()[0].startswith("READY"), screen
        assert "GOT:é ✓ $HOME" in screen and "GOT:" not in driver.read(one)

    def test_a_reused_pane_id_is_never_typed_into(self, driver):
        """A multiplexer hands pane ids out again after it restarts (tmux's ``%N`` count
        from 0, herdr reuses a lost workspace's ids), so a starting agent's recorded
        pane can by then name another agent's pane: that is ``theirs`` below, this
        pane's ids with the marks of the agent that had them. No text and no Enter
        may reach it (the soak, seed 2027, saw a prompt typed into the wrong agent).
        Planted: tmux's prompt guard dropped (``_unless_dead`` without the marks'
        ``if-shell``) -> fails; herdr's ``_input`` taking every pane as ``mine`` -> fails."""
        ref = self.start(driver, driver.ensure_workspace("other"), instance="i1", launch_token="tb")
        theirs = self.marked(ref, "i1", "ta")
        calls = [lambda: driver.send_prompt(theirs, "intruder")]
        if isinstance(driver, SplitPrompt):
            calls += [
                lambda: driver.paste_prompt(theirs, "intruder"),
                lambda: driver.submit_prompt(theirs),
            ]
        for call in calls:
            with pytest.raises(DriverError) as exc:
                call()
            assert exc.value.code == "pane_not_found", exc.value
        driver.send_prompt(self.marked(ref, "i1", "tb"), "hello")
        screen = until(lambda: (s := driver.read(ref)) and "GOT:hello" in s and s, what="hello")
        # a stray Enter would show as an empty GOT:, stray text in front of hello
        assert "intruder" not in screen and screen.count("GOT:") == 1, screen

    def test_send_prompt_arrives_exactly_once(self, driver):
        ref = self.start(driver, driver.ensure_workspace("suite"))
        driver.send_prompt(ref, "hello there")
        until(lambda: "GOT:hello there" in driver.read(ref), what="the prompt submitted")
        # a second prompt: a repeated Enter of the first would be read before it
        driver.send_prompt(ref, "marker")
        until(lambda: "GOT:marker" in driver.read(ref), what="the second prompt submitted")
        screen = driver.read(ref)
        assert screen.count("GOT:") == 2 and screen.count("GOT:hello there") == 1, screen

    def test_paste_then_submit(self, driver):
        if not isinstance(driver, SplitPrompt):
            pytest.skip(f"{driver.name}: no SplitPrompt (paste_prompt, submit_prompt)")
        ref = self.start(driver, driver.ensure_workspace("suite"))
        driver.paste_prompt(ref, "pasted")
        until(lambda: "pasted" in driver.read(ref), what="the paste drawn")
        assert "GOT:" not in driver.read(ref), "submitted before submit_prompt"
        driver.submit_prompt(ref)
        until(lambda: "GOT:pasted" in driver.read(ref), what="the paste submitted")

    def test_move_parks_and_brings_back_only_a_marked_pane(self, driver):
        """Planted: tmux's move without the marks' ``if-shell`` -> fails; herdr's move
        skipping its marks check -> fails."""
        if not isinstance(driver, Parking):
            pytest.skip(f"{driver.name}: no Parking (move)")
        ws = driver.ensure_workspace("suite")
        ref = self.start(driver, ws, instance="i1", launch_token="t1")
        before = self.labelled(driver)["suite/one"]
        for instance, token in (("i2", "t1"), ("i1", "t2"), ("i1;x", "t1")):
            with pytest.raises(DriverError) as exc:
                driver.move(self.marked(ref, instance, token), PARKING)
            assert exc.value.code == "pane_not_found", exc.value
            assert not self.labelled(driver)["suite/one"].parked, (instance, token)
        parked = driver.move(self.marked(ref, "i1", "t1"), PARKING)
        pane = self.labelled(driver)["suite/one"]  # once: moved, never doubled
        assert pane.parked and pane.workspace_id == parked.workspace_id != ws
        assert (pane.instance, pane.launch_token, pane.pid) == ("i1", "t1", before.pid)
        # un-parking asks for the workspace again (a multiplexer may close one its
        # last pane left, as herdr does), as orcr does
        home = driver.ensure_workspace("suite")
        back = driver.move(self.marked(parked, "i1", "t1"), home)
        pane = self.labelled(driver)["suite/one"]
        assert back.workspace_id == pane.workspace_id == home and not pane.parked
        driver.send_prompt(back, "still me")
        until(lambda: "GOT:still me" in driver.read(back), what="the un-parked pane answering")
        driver.close(self.marked(back, "i1", "t1"))
        with pytest.raises(DriverError) as exc:
            driver.move(self.marked(back, "i1", "t1"), PARKING)
        assert exc.value.code == "pane_not_found", exc.value

    def test_pane_process_is_reported(self, driver):
        if not isinstance(driver, PaneProcesses):
            pytest.skip(f"{driver.name}: no PaneProcesses (pane_pid)")
        ref = self.start(driver, driver.ensure_workspace("suite"))
        pid = until(lambda: driver.pane_pid(ref), what="the pane's pid")
        os.kill(pid, 0)  # alive
        driver.close(ref)
        until(lambda: not alive(pid), what=f"pid {pid} ended with its pane")
