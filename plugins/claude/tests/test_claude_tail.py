"""The shared JSONL tailer (orcr_core.kit.jsonl_tail), which orcr_codex reuses."""

import os

from orcr_core.kit import jsonl_tail as tail_module
from orcr_core.kit.jsonl_tail import JsonlTail


def test_partial_last_line_waits_for_the_rest(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": ')
    tail = JsonlTail(path)
    batch = tail.read()
    assert batch.records == [{"a": 1}] and batch.grew
    assert tail.offset == len(b'{"a": 1}\n')
    with path.open("ab") as fh:
        fh.write(b"2}")
    assert tail.read().records == []  # still no newline
    with path.open("ab") as fh:
        fh.write(b"\n")
    assert tail.read().records == [{"b": 2}]
    assert tail.offset == path.stat().st_size


def test_multibyte_character_split_across_reads(tmp_path):
    path = tmp_path / "t.jsonl"
    data = '{"t": "é😀"}\n'.encode()
    path.write_bytes(data[:8])
    tail = JsonlTail(path)
    assert tail.read().records == []
    with path.open("ab") as fh:
        fh.write(data[8:])
    assert tail.read().records == [{"t": "é😀"}]


def test_corrupt_and_non_object_lines_are_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\nnot json,\n[1, 2]\n\n{"b": 2}\n')
    assert JsonlTail(path).read().records == [{"a": 1}, {"b": 2}]


def test_unchanged_file_costs_one_stat_and_no_open(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"partial": ')
    tail = JsonlTail(path)
    tail.read()
    calls = {"stat": 0, "open": 0}
    real_stat, real_open = os.stat, open

    def counting_stat(*a, **k):
        calls["stat"] += 1
        return real_stat(*a, **k)

    def counting_open(*a, **k):
        calls["open"] += 1
        return real_open(*a, **k)

    monkeypatch.setattr(tail_module.os, "stat", counting_stat)
    monkeypatch.setattr(tail_module, "open", counting_open, raising=False)
    offset = tail.offset
    batch = tail.read()
    assert calls == {"stat": 1, "open": 0}
    assert batch.records == [] and not batch.grew and not batch.reset
    assert tail.offset == offset


def test_missing_file_then_created(tmp_path):
    path = tmp_path / "later.jsonl"
    tail = JsonlTail(path)
    assert tail.read().records == []
    path.write_bytes(b'{"a": 1}\n')
    assert tail.read().records == [{"a": 1}]


def test_replaced_file_is_reread_from_the_start(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"old": 1}\n{"old": 2}\n')
    tail = JsonlTail(path)
    tail.read()
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_bytes(b'{"new": 1}\n{"new": 2}\n{"new": 3}\n')
    os.replace(fresh, path)  # new inode
    batch = tail.read()
    assert batch.reset and batch.records == [{"new": 1}, {"new": 2}, {"new": 3}]


def test_truncated_file_is_reread_from_the_start(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"old": 1}\n{"old": 2}\n')
    tail = JsonlTail(path)
    tail.read()
    with path.open("r+b") as fh:
        fh.truncate(0)
        fh.write(b'{"x": 1}\n')
    batch = tail.read()
    assert batch.reset and batch.records == [{"x": 1}]


def test_reader_rebuilds_its_state_on_reset(tmp_path):
    from orcr_claude import ClaudeProvider

    path = tmp_path / "t.jsonl"
    prompt = b'{"type": "user", "message": {"role": "user", "content": "hi"}}\n'
    path.write_bytes(prompt + prompt)
    reader = ClaudeProvider().open_reader(str(path), settle=0.0)
    assert len(reader.poll().turns) == 2
    path.write_bytes(prompt)  # truncated and rewritten
    assert len(reader.poll().turns) == 1


def test_large_file_read_in_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(tail_module, "_BLOCK", 7)
    path = tmp_path / "t.jsonl"
    records = [{"i": i, "pad": "x" * (i % 13)} for i in range(50)]
    path.write_text("".join(f'{{"i": {r["i"]}, "pad": "{r["pad"]}"}}\n' for r in records))
    assert JsonlTail(path).read().records == records
