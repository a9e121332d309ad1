"""The fleet table: a virtual list that draws only the lines on screen.

Textual's line API: ``render_line`` formats one visible line from the model's
rows on demand, so a batch of events or the once-a-second clock costs the lines
in view, not the 500 (or 5,000) rows behind them.
"""

from __future__ import annotations

import time

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from orcr_core.top.loops import loop_info, loop_summary
from orcr_core.top.model import Group
from orcr_core.top.rows import STATUSES, Row, duration, mem_text, tokens_text

STATUS_STYLE = {
    "working": Style(color="green", bold=True),
    "idle": Style(color="cyan"),
    "starting": Style(color="yellow"),
    "queued": Style(color="yellow"),
    "lost": Style(color="red", bold=True),
    "ended": Style(dim=True),
}
GROUP_STYLE = Style(bold=True)
LOOP_STYLE = Style(color="magenta")
STALLED_STYLE = Style(color="red", bold=True)
PARKED_STYLE = Style(dim=True)  # parked is no alarm: the agent waits out of the way
CURSOR_STYLE = Style(reverse=True)
HEAD_STYLE = Style(bold=True, underline=True)
SIZE_STEP = 32
#: (title, width); PATH is sized to the rows, ANSWER takes what is left
COLUMNS = [
    ("PATH", 0),
    ("PROVIDER", 9),
    ("STATUS", 9),
    ("TIME", 7),
    ("TURN", 5),
    ("TOKENS", 7),
    ("MEM", 11),
    ("STALLED", 8),
    ("EXIT", 9),
    ("ANSWER", 0),
]


def _fit(text: str, width: int) -> str:
    if len(text) > width:
        return text[: max(0, width - 1)] + "…" if width > 1 else text[:width]
    return text.ljust(width)


class FleetTable(ScrollView, can_focus=True):
    """Group lines and agent lines with a row cursor that stays on its agent."""

    BINDINGS = [
        Binding("up", "cursor(-1)", show=False),
        Binding("down", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "jump(0)", show=False),
        Binding("end", "jump(-1)", show=False),
    ]
    DEFAULT_CSS = "FleetTable { height: 1fr; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lines: list[tuple[str, Group | Row]] = []
        self.keys: list[str] = []
        self.cursor = 0
        self.path_width = 20
        self._drawn: dict[int, tuple | None] = {}  # screen line -> what it shows

    # -- content --------------------------------------------------------------

    def set_groups(self, groups: list[Group]) -> None:
        """New rows; the cursor stays on the agent (or group) it was on."""
        selected = self.selected_key()
        lines: list[tuple[str, Group | Row]] = []
        longest = 4
        for g in groups:
            lines.append((f"g:{g.name}", g))
            for r in g.rows:
                lines.append((r.uuid, r))
                longest = max(longest, len(r.path) + 2)
        self.lines = lines
        self.keys = [k for k, _ in lines]
        width = min(longest, 60)
        cursor = self.cursor
        if selected is not None and selected in self.keys:
            cursor = self.keys.index(selected)
        cursor = max(0, min(cursor, len(lines) - 1))
        # a new virtual size re-lays the screen out (a full repaint): grow it in steps
        # of SIZE_STEP lines rather than on every agent that comes or goes
        need = len(lines) + 1
        height = self.virtual_size.height
        if need <= max(self.size.height, 1):
            height = need
        elif not (need <= height < need + 2 * SIZE_STEP):
            height = need + SIZE_STEP
        size = Size(self.size.width, height)
        if size != self.virtual_size:
            self.virtual_size = size
        if width != self.path_width or cursor != self.cursor:
            self.path_width, self.cursor = width, cursor
            self.refresh()
            return
        # redraw only the lines in view whose content changed: a batch touches a few
        top = self.scroll_offset.y
        for y in range(1, self.size.height):
            index = top + y - 1
            sig = self._signature(index) if index < len(lines) else None
            if self._drawn.get(y) != sig:
                self.refresh(Region(0, y, self.size.width, 1))

    def _signature(self, index: int) -> tuple:
        key, item = self.lines[index]
        if isinstance(item, Group):
            loop = item.loop
            shown = loop_summary(loop_info(loop)) if loop else None
            return (key, tuple(r.status for r in item.rows), shown)
        return (key, item.signature())

    def selected_key(self) -> str | None:
        if not self.keys:
            return None
        return self.keys[min(self.cursor, len(self.keys) - 1)]

    def move_to(self, index: int) -> None:
        if not self.lines:
            return
        self.cursor = max(0, min(index, len(self.lines) - 1))
        # screen line 0 holds the column titles, so row i is virtual line i + 1 and
        # must not scroll under them: keep lines i..i+1 in view
        self.scroll_to_region(Region(0, self.cursor, 1, 2), animate=False, immediate=True)
        self.refresh()

    # -- keys -----------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        self.move_to(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        self.move_to(0 if where == 0 else len(self.lines) - 1)

    # -- drawing --------------------------------------------------------------

    def widths(self, total: int) -> list[int]:
        widths = [self.path_width if w == 0 else w for _, w in COLUMNS]
        widths[-1] = max(10, total - sum(widths[:-1]) - len(widths))
        return widths

    def cells(self, row: Row, now: float) -> list[tuple[str, Style | None]]:
        age = None if row.since is None else now - row.since
        return [
            ("  " + row.path, None),
            (row.provider, None),
            (row.status, STATUS_STYLE.get(row.status)),
            (duration(age), None),
            (str(row.turn), None),
            (tokens_text(row.tokens), None),
            (mem_text(row.memory), None),
            (row.flag, PARKED_STYLE if row.flag == "parked" else STALLED_STYLE),
            (row.exit_reason or "", None),
            # a queued row says what holds it where its answer will be (STATUS is narrow)
            (row.blocked or row.answer or (f"held: {row.held}" if row.held else ""), None),
        ]

    def line_text(self, index: int, now: float | None = None) -> str:
        """The plain text of row ``index`` as drawn (for tests)."""
        return "".join(seg.text for seg in self._line(index, 400, now or time.time())).rstrip()

    def _line(self, index: int, width: int, now: float) -> list[Segment]:
        key, item = self.lines[index]
        if isinstance(item, Group):
            counts: dict[str, int] = {}
            for r in item.rows:
                counts[r.status] = counts.get(r.status, 0) + 1
            summary = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts.get(s))
            label = f"▾ {item.name}/ ({summary or 'no agents'})"
            if item.loop is None:
                return [Segment(_fit(label, width), GROUP_STYLE)]
            loop = "  ⟳ " + loop_summary(loop_info(item.loop))
            return [
                Segment(label, GROUP_STYLE),
                Segment(_fit(loop, max(0, width - len(label))), LOOP_STYLE),
            ]
        segs = []
        for (text, style), w in zip(self.cells(item, now), self.widths(width), strict=True):
            segs.append(Segment(_fit(text, w) + " ", style))
        return segs

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:  # the column titles stay put
            segs = [
                Segment(_fit(title, w) + " ", HEAD_STYLE)
                for (title, _), w in zip(COLUMNS, self.widths(width), strict=True)
            ]
            return Strip(segs).crop_extend(0, width, None)
        index = y - 1 + self.scroll_offset.y
        if index >= len(self.lines):
            self._drawn[y] = None
            return Strip.blank(width)
        self._drawn[y] = self._signature(index)
        strip = Strip(self._line(index, width, time.time())).crop_extend(0, width, None)
        if index == self.cursor and self.has_focus:
            strip = strip.apply_style(CURSOR_STYLE)
        elif index == self.cursor:
            strip = strip.apply_style(Style(underline=True))
        return strip
