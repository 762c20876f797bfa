"""Read a dataset or trace file: its format named, or recognised from the file."""

from __future__ import annotations

import json
from pathlib import Path

from perfkit.datasets.formats import READERS
from perfkit.datasets.records import DatasetError, DatasetRecord

FORMATS = ("auto", *READERS)
MAX_RECORDS = 10_000_000


def detect_format(path: Path) -> str:
    """.csv -> burstgpt; .json -> sharegpt; JSONL by its first record's keys."""
    if path.suffix == ".csv":
        return "burstgpt"
    if path.suffix == ".json":
        return "sharegpt"
    with path.open(encoding="utf-8") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        raise DatasetError.at(path, 1, None, "cannot tell its format: not JSON Lines, .json "
                              "or .csv; name it with the dataset format") from None
    if isinstance(obj, dict) and "input_length" in obj:
        return "mooncake"
    return "jsonl"


def load_records(path: Path, fmt: str = "auto") -> list[DatasetRecord]:
    if fmt not in FORMATS:
        raise DatasetError(f"dataset format {fmt!r} unknown; choose one of {', '.join(FORMATS)}")
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise DatasetError(f"dataset {path} {what}; name a {', '.join(READERS)} file")
    try:
        reader = READERS[detect_format(path) if fmt == "auto" else fmt]
        records = []
        for rec in reader(path):
            records.append(rec)
            if len(records) > MAX_RECORDS:
                raise DatasetError(f"{path}: more than {MAX_RECORDS:,} records")
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetError(f"{path}: cannot read it ({err})") from None
    if not records:
        raise DatasetError(f"{path}: no records")
    return records
