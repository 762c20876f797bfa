"""One request as a dataset or trace file describes it, before it becomes token ids.

A record holds what its format gives: token ids, text (which needs a tokenizer), or only
lengths; a timestamp when the file is a trace; block hash ids when the trace marks shared
prefixes (Mooncake: one id per 512-token block, equal ids = equal blocks); the
conversation and turn of a multi-turn record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfkit.errors import PerfkitError

MOONCAKE_BLOCK = 512  # tokens per hash id in Mooncake traces


class DatasetError(PerfkitError):
    """A dataset file is unreadable or a record is malformed: names the file, line, field."""

    @classmethod
    def at(cls, path: Path, line: int | None, field: str | None, message: str) -> DatasetError:
        where = str(path) + (f":{line}" if line is not None else "")
        return cls(f"{where}: {field + ': ' if field else ''}{message}")


@dataclass(frozen=True)
class DatasetRecord:
    line: int  # where it came from (1-based line, or record number in a JSON list)
    prompt_ids: tuple[int, ...] | None = None
    prompt_text: str | None = None
    prompt_len: int | None = None  # lengths-only records (traces)
    output_len: int | None = None  # None: output_text's tokens, else the profile's lengths
    output_text: str | None = None  # ShareGPT: the reply, measured in tokens by the tokenizer
    timestamp_s: float | None = None  # traces: arrival, seconds from the file's start
    hash_ids: tuple[int, ...] | None = None  # Mooncake: one per MOONCAKE_BLOCK tokens
    conversation: int | None = None  # multi-turn: which conversation
    turn: int = 0  # multi-turn: 0 for the first user turn

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.prompt_ids, self.prompt_text, self.prompt_len)]
        if sum(given) != 1:
            raise ValueError("a record has exactly one of prompt_ids, prompt_text, prompt_len")
