"""What ``orcr top``'s keys do (the bindings are :attr:`TopApp.BINDINGS
<orcr_core.top.app.TopApp>`): filter, sort, read, prompt, kill, attach, resume, loops."""

from __future__ import annotations

import subprocess

from textual import work
from textual.app import SuspendNotSupported
from textual.widgets import Input, Static

from orcr_core.sdk.client import ServerError
from orcr_core.top.filtering import SORTS, Filter
from orcr_core.top.screens import AnswerScreen, ConfirmScreen, HelpScreen, PromptScreen


class KeyActions:
    """Mixed into :class:`orcr_core.top.app.TopApp` (its model, filter, sort, requests,
    selection, notify)."""

    # -- keys -----------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.filter_box
        box.value = self.flt.text
        box.add_class("shown")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "filter":
            return
        self.flt = Filter.parse(event.value)
        event.input.remove_class("shown")
        self.table.focus()
        self.refresh_view()

    def key_escape(self) -> None:
        box = self.filter_box
        if box.has_class("shown"):
            box.remove_class("shown")
            self.table.focus()

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh_view()
        self.notify(f"sorted by {self.sort}", timeout=1.5)

    def action_answer(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        screen = AnswerScreen(row)
        self.push_screen(screen)
        self._load_answer(screen, row.uuid)

    @work(thread=True)
    def _load_answer(self, screen: AnswerScreen, uuid: str) -> None:
        try:
            res = self.requests.call("agent.read", target=uuid)
            text = res.get("text")
            if text is None:
                text = res.get("screen") or "(no answer yet)"
        except (ServerError, OSError) as exc:
            text = f"cannot read it: {getattr(exc, 'message', exc)}"
        self.call_from_thread(lambda: screen.query_one("#answer", Static).update(text))

    def action_prompt(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        if row.status != "idle":
            self.notify(f"{row.path} is {row.status}; p needs an idle agent", severity="warning")
            return

        def sent(text: str | None) -> None:
            if text:
                self._send(row.uuid, row.path, text)

        self.push_screen(PromptScreen(row), sent)

    @work(thread=True)
    def _send(self, uuid: str, path: str, text: str) -> None:
        try:
            self.requests.call("agent.send", target=uuid, prompt=text)
            self.call_from_thread(self.notify, f"sent to {path}", timeout=2)
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"{path}: {getattr(exc, 'message', exc)}", severity="error"
            )

    def action_kill(self) -> None:
        key = self.selected_key()
        if key is None:
            return
        if key.startswith("g:"):
            self._confirm_glob(f"{key[2:]}/**")
            return
        row = self.model.rows[key]
        if row.status == "ended":
            self.notify(f"{row.path} has already ended ({row.exit_reason})", severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._kill(row.uuid, row.path)

        self.push_screen(
            ConfirmScreen(f"Kill {row.path} ({row.status}, {row.provider})?"), confirmed
        )

    def action_kill_filtered(self) -> None:
        glob = self.flt.glob
        if glob is None:
            self.notify("K kills the filter's path glob; set one with / (e.g. review/*)")
            return
        self._confirm_glob(glob)

    def _confirm_glob(self, glob: str) -> None:
        rows = self.model.matching(glob)
        if not rows:
            self.notify(f"no active agent matches {glob}", severity="warning")
            return
        shown = "\n".join(f"{r.path} ({r.status})" for r in rows[:12])
        if len(rows) > 12:
            shown += f"\n… and {len(rows) - 12} more"
        n = len(rows)

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._kill(glob, glob)

        self.push_screen(
            ConfirmScreen(f"Kill {n} agent{'s' if n != 1 else ''} matching {glob}?", shown),
            confirmed,
        )

    @work(thread=True)
    def _kill(self, target: str, what: str) -> None:
        try:
            killed = self.requests.call("agent.kill", target=target)["killed"]
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"kill {what}: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        summary = ", ".join(f"{k['path']} {k['result']}" for k in killed[:5])
        if len(killed) > 5:
            summary += f", … ({len(killed)} in all)"
        self.call_from_thread(self.notify, summary or f"nothing to kill for {what}", timeout=3)

    def action_attach(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        self._attach(row.uuid, row.path)

    @work(thread=True)
    def _attach(self, uuid: str, path: str) -> None:
        try:
            res = self.requests.call("agent.attach", target=uuid)
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"{path}: {getattr(exc, 'message', exc)}", severity="warning"
            )
            return
        self.call_from_thread(self._run_attach, res)

    def _run_attach(self, res: dict) -> None:
        command = res.get("command")
        self.last_attach_hint = res.get("hint") or ""
        if command:
            try:
                with self.suspend():
                    rc = subprocess.run(command).returncode  # argv, no shell; until detached
                if rc == 0:
                    return
                self.last_attach_hint = f"the attach command exited {rc}; {self.last_attach_hint}"
            except (SuspendNotSupported, OSError):
                pass
        self.notify(self.last_attach_hint, title="attach", timeout=15)

    def action_resume(self) -> None:
        row = self.selected_row()
        if row is None:
            self.notify("r resumes a lost agent: select its row", severity="warning")
            return
        why = row.not_resumable()
        if why is not None:
            self.notify(why, severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._resume(row.uuid, row.path)

        now = row.status + (f" ({row.exit_reason})" if row.exit_reason else "")
        self.push_screen(
            ConfirmScreen(
                f"Resume {row.path} ({now}, {row.provider})?",
                "It is queued again and started in a new pane in its own session: "
                "same path, uuid and transcript; no prompt is typed.",
                hint="y resumes · n or escape leaves it",
            ),
            confirmed,
        )

    @work(thread=True)
    def _resume(self, uuid: str, path: str) -> None:
        try:
            agent = self.requests.call("agent.resume", target=uuid)["agent"]
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"resume {path}: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        self.call_from_thread(self.notify, f"{path} {agent['status']} (resumed)", timeout=3)

    def selected_loop(self) -> dict | None:
        key = self.selected_key()
        if key is None:
            return None
        name = key[2:] if key.startswith("g:") else self.model.rows[key].group
        return self.model.loops.get(name)

    def action_loop_toggle(self) -> None:
        loop = self.selected_loop()
        if loop is None:
            self.notify("space pauses or resumes a loop: select a loop's group", severity="warning")
            return
        method = "loop.resume" if loop["status"] == "paused" else "loop.pause"
        self._loop_call(method, loop["name"], f"{loop['name']}: {method.split('.')[1]}d")

    def action_fire(self) -> None:
        loop = self.selected_loop()
        if loop is None:
            self.notify("f fires a loop now: select a loop's group", severity="warning")
            return
        self._loop_call("loop.run.start", loop["name"], None)

    @work(thread=True)
    def _loop_call(self, method: str, name: str, done: str | None) -> None:
        try:
            res = self.requests.call(method, target=name)
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"{name}: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        if done is None:  # a run: say which
            run = res["run"]
            done = f"{run['path']} {run['status']}"
        self.call_from_thread(self.notify, done, timeout=3)  # its events refresh the loop line

    def action_help(self) -> None:
        self.push_screen(HelpScreen())
