"""Task files: Markdown with a front matter block.

Front matter values are JSON (strings quoted, lists in brackets), which is
also valid YAML, so Obsidian, Dataview or ``yq`` read the same fields. A
hand-written unquoted value (``id: T12``) is read as a plain string; a value
that starts like JSON (``[``, ``{``, ``"``) but is not JSON is refused, and
the fields orcr reads are checked for their type (:func:`check_fields`), so a
file either parses into a task orcr can work or raises :class:`TaskFileError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

#: a task id: a file name that is also readable in an agent path
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: headings orcr appends; the task text is what comes before the first one
SECTION = re.compile(
    r"^## (Reject|Pass|Question|Answer|Attempt failed|Verification returned|Refused|Land \w+|Unverifiable)\b",
    re.M,
)
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
    "branch",
    "model",
    "built_by",
    "passes",
    "done_at",
    "verified",
    "landed_commit",
    "landed_onto",
    "landed_at",
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
        """Append a section. A line of ``text`` that would read as a section heading
        (an agent's answer quoting an earlier attempt) is indented, so it stays text."""
        body = self.body.rstrip("\n")
        text = "\n".join(
            f"    {ln}" if SECTION.match(ln) else ln for ln in text.strip().splitlines()
        )
        self.body = f"{body}\n\n## {heading}\n\n{text}\n"

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
    # the block may be absent or empty: say which, rather than "no 'id'"
    if not text[4:end].strip():
        raise TaskFileError(f"{where}: the front matter block is empty")
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
            if raw[0] in '[{"':
                raise TaskFileError(
                    f"{where} line {n}: {key.strip()}: {raw!r} is not a valid JSON value "
                    '(lists are ["a", "b"], strings "quoted")'
                ) from None
            value = raw
        meta[key.strip()] = value
    if "id" not in meta:
        raise TaskFileError(f"{where} has no 'id' field")
    if isinstance(meta["id"], int | float) and not isinstance(meta["id"], bool):
        meta["id"] = str(meta["id"])  # id: 12
    check_fields(meta, where)
    return Task(meta, text[end + 5 :])


def _count(meta: dict, key: str, where: str, least: int) -> None:
    value = meta.get(key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise TaskFileError(f"{where}: {key}: {value!r} is not a whole number >= {least}")


def check_fields(meta: dict, where: str) -> None:
    """The fields orcr reads have the types it reads them as."""
    try:
        check_id(meta.get("id"))
    except TaskFileError as exc:
        raise TaskFileError(f"{where}: {exc}") from None
    _count(meta, "attempts", where, 0)
    _count(meta, "verifiers", where, 1)
    deps = meta.get("depends_on")
    if deps is not None:
        if not isinstance(deps, list):
            raise TaskFileError(f'{where}: depends_on: {deps!r} is not a list (["T1", "T2"])')
        for dep in deps:
            try:
                check_id(dep)
            except TaskFileError as exc:
                raise TaskFileError(f"{where}: depends_on: {exc}") from None
    for key in ("done_when", "cluster", "provider", "revision", "branch", "model", "built_by"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            raise TaskFileError(f"{where}: {key}: {value!r} is not a string")
    verified = meta.get("verified")
    if verified is not None and not (
        isinstance(verified, list) and all(v is None or isinstance(v, str) for v in verified)
    ):
        raise TaskFileError(f"{where}: verified: {verified!r} is not a list of revisions")
    passes = meta.get("passes")
    if passes is not None and not (
        isinstance(passes, list) and all(isinstance(p, str) for p in passes)
    ):
        raise TaskFileError(f"{where}: passes: {passes!r} is not a list of provider names")


def load(path, task_id: str | None = None) -> Task:
    """Read and parse a task file; every way it can be unreadable is a TaskFileError:
    not a regular file, not UTF-8, no or bad front matter, an id other than its name."""
    import os
    import stat

    where = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    if not stat.S_ISREG(st.st_mode):
        raise TaskFileError(f"{where} is not a regular file")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{where} is not UTF-8 text (byte {exc.start})") from None
    except IsADirectoryError:
        raise TaskFileError(f"{where} is not a regular file") from None
    task = parse(text, where)
    if task_id is not None and task.id != task_id:
        raise TaskFileError(
            f"{where}: its front matter says id {task.id!r}, but the file is named "
            f"{task_id}.md: rename the file or fix the id"
        )
    return task
