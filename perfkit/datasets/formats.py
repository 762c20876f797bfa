"""Readers of the formats users bring; each yields DatasetRecords or raises DatasetError
naming the file, the line (or record) and the field.

  sharegpt   JSON list of {"id", "conversations": [{"from": "human"|"gpt", "value"}]}:
             one record per human turn; its prompt is the conversation so far plus the
             turn (text, so a tokenizer is needed), its output the gpt reply's length.
  jsonl      one object a line: "prompt" (text, or a list of token ids), optional
             "output_len" (or "max_tokens"), optional "timestamp" (seconds).
  mooncake   JSONL: "timestamp" (ms), "input_length", "output_length", "hash_ids".
  burstgpt   CSV: Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from perfkit.datasets.records import MOONCAKE_BLOCK, DatasetError, DatasetRecord

MAX_RECORD_TOKENS = 1 << 24  # a record longer than this is malformed, not a workload


def _count(path: Path, line: int, field: str, value: Any, allow_zero: bool = False) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= (0 if allow_zero
                                                                              else 1)
    if not ok or value > MAX_RECORD_TOKENS:
        low = ">= 0" if allow_zero else ">= 1"
        raise DatasetError.at(path, line, field, f"expected an integer {low} and <= "
                              f"{MAX_RECORD_TOKENS}, got {value!r}")
    return int(value)


def _seconds(path: Path, line: int, field: str, value: Any, scale: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise DatasetError.at(path, line, field, f"expected a time >= 0, got {value!r}")
    return float(value) * scale


def _token_ids(path: Path, line: int, field: str, value: list[Any]) -> tuple[int, ...]:
    if not value:
        raise DatasetError.at(path, line, field, "expected at least one token id")
    for i, tok in enumerate(value):
        if isinstance(tok, bool) or not isinstance(tok, int) or tok < 0:
            raise DatasetError.at(path, line, f"{field}[{i}]",
                                  f"expected a token id >= 0, got {tok!r}")
    return tuple(value)


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for n, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                raise DatasetError.at(path, n, None, f"not JSON ({err.msg})") from None
            if not isinstance(obj, dict):
                raise DatasetError.at(path, n, None, "expected a JSON object")
            yield n, obj


def read_jsonl(path: Path) -> Iterator[DatasetRecord]:
    for n, obj in _json_lines(path):
        prompt = obj.get("prompt")
        out = obj.get("output_len", obj.get("max_tokens"))
        out_len = None if out is None else _count(path, n, "output_len", out)
        ts = obj.get("timestamp")
        when = None if ts is None else _seconds(path, n, "timestamp", ts)
        if isinstance(prompt, str) and prompt:
            yield DatasetRecord(n, prompt_text=prompt, output_len=out_len, timestamp_s=when)
        elif isinstance(prompt, list):
            yield DatasetRecord(n, prompt_ids=_token_ids(path, n, "prompt", prompt),
                                output_len=out_len, timestamp_s=when)
        else:
            raise DatasetError.at(path, n, "prompt", "expected text or a list of token ids, "
                                  f"got {prompt!r}"[:120])


def read_mooncake(path: Path) -> Iterator[DatasetRecord]:
    for n, obj in _json_lines(path):
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise DatasetError.at(path, n, key, "missing")
        length = _count(path, n, "input_length", obj["input_length"])
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list):
            raise DatasetError.at(path, n, "hash_ids", f"expected a list, got {ids!r}")
        hashes = _token_ids(path, n, "hash_ids", ids) if ids else ()
        if len(hashes) * MOONCAKE_BLOCK < length - MOONCAKE_BLOCK + 1 and hashes:
            raise DatasetError.at(path, n, "hash_ids", f"{len(hashes)} ids of "
                                  f"{MOONCAKE_BLOCK} tokens cannot cover {length} tokens")
        yield DatasetRecord(n, prompt_len=length,
                            output_len=_count(path, n, "output_length", obj["output_length"]),
                            timestamp_s=_seconds(path, n, "timestamp", obj["timestamp"], 1e-3),
                            hash_ids=hashes or None)


BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def read_burstgpt(path: Path) -> Iterator[DatasetRecord]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in BURSTGPT_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError.at(path, 1, missing[0], "column missing from the header")
        for row in reader:
            n = reader.line_num
            values = {c: _number(path, n, c, row[c]) for c in BURSTGPT_COLUMNS}
            if values["Request tokens"] == 0:
                continue  # BurstGPT logs failed requests with 0 tokens: nothing to send
            yield DatasetRecord(
                n, prompt_len=_count(path, n, "Request tokens", values["Request tokens"]),
                output_len=_count(path, n, "Response tokens", values["Response tokens"]),
                timestamp_s=_seconds(path, n, "Timestamp", values["Timestamp"]))


def _number(path: Path, line: int, field: str, text: str | None) -> int | float:
    try:
        value = float(text or "")
    except ValueError:
        raise DatasetError.at(path, line, field, f"expected a number, got {text!r}") from None
    return int(value) if value.is_integer() else value


def read_sharegpt(path: Path) -> Iterator[DatasetRecord]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DatasetError.at(path, err.lineno, None, f"not JSON ({err.msg})") from None
    if not isinstance(data, list):
        raise DatasetError.at(path, None, None, "expected a JSON list of conversations")
    for c, conv in enumerate(data):
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            raise DatasetError.at(path, c + 1, "conversations", "expected a list of turns")
        yield from _sharegpt_turns(path, c, turns)


def _sharegpt_turns(path: Path, c: int, turns: list[Any]) -> Iterator[DatasetRecord]:
    history: list[str] = []
    turn = 0
    for t, msg in enumerate(turns):
        who = msg.get("from") if isinstance(msg, dict) else None
        text = msg.get("value") if isinstance(msg, dict) else None
        if who not in ("human", "gpt", "system") or not isinstance(text, str):
            raise DatasetError.at(path, c + 1, f"conversations[{t}]",
                                  'expected {"from": "human"|"gpt", "value": text}')
        if who == "human":
            reply = turns[t + 1] if t + 1 < len(turns) else None
            answer = reply.get("value") if isinstance(reply, dict) else None
            if isinstance(answer, str) and answer:
                history.append(text)
                yield DatasetRecord(c + 1, prompt_text="\n".join(history),
                                    output_text=answer, conversation=c, turn=turn)
                history.append(answer)
                turn += 1
        elif who == "system":
            history.append(text)


READERS: dict[str, Callable[[Path], Iterator[DatasetRecord]]] = {
    "sharegpt": read_sharegpt, "jsonl": read_jsonl, "mooncake": read_mooncake,
    "burstgpt": read_burstgpt,
}
