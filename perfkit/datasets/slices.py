"""A sweep level's requests from the profile's dataset ([workload.dataset]).

Each level takes its own slice of the file when the file is long enough (level i gets
records [i * n, (i + 1) * n), the same slice in every repeat), so a server that keeps its
prefix cache across levels sees no prompt twice; a shorter file is shared by the levels
(its first n records). A file with fewer records than a level needs is reused, as vLLM's
bench and AIPerf do: its records repeat in file order (`reuse_note` says how often;
multi-turn files are not repeated, a conversation's turns cannot come twice). Closed-loop
levels ignore timestamps; open-loop levels arrive
poisson at the level's rate, or (replay = "timestamps") in the file's own pattern scaled
to the rate. Multi-turn records keep their conversation and turn: the load generator
sends a conversation's turns in order, each after the previous one ended.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from perfkit.config.schema import Profile
from perfkit.datasets.load import load_records
from perfkit.datasets.records import DatasetError, DatasetRecord
from perfkit.datasets.specs import SpecBuilder, Tokenize, dataset_specs, scale_arrivals
from perfkit.datasets.tokenizer import read_tokenizer
from perfkit.result.level import LoadPoint
from perfkit.workload import RequestSpec, level_arrivals, with_outputs


@lru_cache(maxsize=4)
def _records(path: str, fmt: str, mtime_ns: int) -> tuple[DatasetRecord, ...]:
    return tuple(load_records(Path(path), fmt))


def records_of(profile: Profile) -> tuple[DatasetRecord, ...]:
    ds = profile.workload.dataset
    path = Path(ds.path)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = 0  # load_records says what is wrong with it
    return _records(str(path), ds.format, mtime)


@lru_cache(maxsize=4)
def load_tokenizer(folder: str) -> Tokenize:
    """The dataset's tokenizer: ids of a text, without special tokens."""
    tok = read_tokenizer(Path(folder), "workload.dataset.tokenizer")
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _slice(records: tuple[DatasetRecord, ...], index: int, levels: int, want: int,
           need: int, path: str) -> tuple[DatasetRecord, ...]:
    """`want` records for the level (`need` at least: warm-up + measured requests)."""
    if len(records) < need:
        if any(r.conversation is not None for r in records):
            raise DatasetError(f"{path}: {len(records)} records, but a level needs {need} "
                               "(warm-up + measured requests), and multi-turn records are "
                               "not repeated: lower --requests or --warmup")
        return _repeated(records, max(want, need))
    n = min(want, len(records))
    if len(records) >= n * levels:
        return records[index * n:(index + 1) * n]
    return records[:n]


def _repeated(records: tuple[DatasetRecord, ...], count: int) -> tuple[DatasetRecord, ...]:
    """`count` records, the file's in order again and again; timestamps of each pass come
    after the previous pass (shifted by the file's span plus its mean gap)."""
    stamps = [r.timestamp_s for r in records if r.timestamp_s is not None]
    span = max(stamps) - min(stamps) if stamps else 0.0
    step = span + (span / (len(stamps) - 1) if len(stamps) > 1 else 0.0)
    out = []
    for i in range(count):
        rec, laps = records[i % len(records)], i // len(records)
        if laps and rec.timestamp_s is not None:
            rec = replace(rec, timestamp_s=rec.timestamp_s + laps * step)
        out.append(rec)
    return tuple(out)


def reuse_note(profile: Profile, need: int) -> str | None:
    """A warning when a level needing `need` records reuses the file's; None when not."""
    have = len(records_of(profile))
    if have == 0 or have >= need:
        return None
    return (f"{profile.workload.dataset.path}: {have} records and a level needs {need} "
            f"(warm-up + measured requests): the records are reused, each about "
            f"{need / have:.1f} times (a server's prefix cache sees the repeats)")


def dataset_level_specs(profile: Profile, levels: list[LoadPoint], level: LoadPoint,
                        want: int, need: int) -> list[RequestSpec]:
    ds, wl = profile.workload.dataset, profile.workload
    index = levels.index(level) if level in levels else 0  # a searched level: the first
    records = _slice(records_of(profile), index, len(levels), want, need, ds.path)
    tokenizer = load_tokenizer(ds.tokenizer) if ds.tokenizer else None
    builder = SpecBuilder(Path(ds.path), profile.model.vocab_size, wl.output_len, wl.seed,
                          tokenizer)
    specs = [replace(s, think_s=ds.think_time_s) if s.turn else s
             for s in with_outputs(dataset_specs(records, builder), wl)]
    if level.rate is None:
        return [replace(s, arrival_s=0.0) for s in specs]
    if ds.replay == "timestamps":
        return scale_arrivals(specs, level.rate)
    times = level_arrivals(wl.arrival, level.rate, len(specs), wl.seed)
    return [replace(s, arrival_s=t) for s, t in zip(specs, times)]
