"""Task files: Markdown with a front matter block.

Front matter values are JSON (strings quoted, lists in brackets), which is
also valid YAML, so Obsidian, Dataview or ``yq`` read the same fields. A
hand-written unquoted value (``id: T12``) is read as a plain string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

#: a task id: a file name that is also readable in an agent path
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: headings orcr appends; the task text is what comes before the first one
SECTION = re.compile(r"^## (Reject|Pass|Question|Answer|Attempt failed)\b", re.M)
ORDER = (
    "id",
    "depends_on",
    "done_when",
    "attempts",
    "cluster",
    "provider",
    "verifiers",
    "created",
    "moved_to",
    "revision",
    "built_by",
    "passes",
    "done_at",
)


class TaskFileError(ValueError):
    pass


def check_id(task_id: str) -> str:
    if not isinstance(task_id, str) or not ID.fullmatch(task_id) or task_id.endswith(".md"):
        raise TaskFileError(
            f"task id {task_id!r} is not allowed: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (e.g. T12, grpc-billing)"
        )
    return task_id


@dataclass
class Task:
    meta: dict = field(default_factory=dict)
    body: str = ""

    @property
    def id(self) -> str:
        return self.meta["id"]

    @property
    def attempts(self) -> int:
        return int(self.meta.get("attempts") or 0)

    @property
    def depends_on(self) -> list[str]:
        return list(self.meta.get("depends_on") or [])

    @property
    def verifiers(self) -> int:
        return max(1, int(self.meta.get("verifiers") or 1))

    @property
    def text(self) -> str:
        """The coordinator's task text, without the sections orcr appended."""
        m = SECTION.search(self.body)
        return (self.body[: m.start()] if m else self.body).strip()

    def sections(self, kind: str) -> int:
        return len(re.findall(rf"^## {re.escape(kind)}\b", self.body, re.M))

    def append(self, heading: str, text: str) -> None:
        body = self.body.rstrip("\n")
        self.body = f"{body}\n\n## {heading}\n\n{text.strip()}\n"

    def render(self) -> str:
        keys = [k for k in ORDER if k in self.meta] + sorted(k for k in self.meta if k not in ORDER)
        lines = ["---"]
        for k in keys:
            if self.meta[k] is None:
                continue
            lines.append(f"{k}: {json.dumps(self.meta[k], ensure_ascii=False)}")
        lines.append("---")
        return "\n".join(lines) + "\n" + self.body.lstrip("\n").rstrip("\n") + "\n"


def parse(text: str, where: str = "task file") -> Task:
    if not text.startswith("---\n"):
        raise TaskFileError(f"{where} does not start with a '---' front matter block")
    end = text.find("\n---\n", 3)
    if end < 0:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise TaskFileError(f"{where}: the front matter block has no closing '---'")
    meta: dict = {}
    for n, line in enumerate(text[4:end].splitlines(), 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, raw = line.partition(":")
        if not sep or not key.strip():
            raise TaskFileError(f"{where} line {n}: expected 'key: value', got {line!r}")
        raw = raw.strip()
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            value = raw
        meta[key.strip()] = value
    if "id" not in meta:
        raise TaskFileError(f"{where} has no 'id' field")
    meta["id"] = str(meta["id"])
    return Task(meta, text[end + 5 :])
