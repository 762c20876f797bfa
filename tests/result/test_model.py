"""The result model: one codec both ways, the shipped schema is the generated one, v1
files read as v2 with null for what was never measured, errors name the path."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from perfkit.errors import PerfkitError
from perfkit.result.codec import ResultError, from_json, to_json
from perfkit.result.io import decode_result, load_result, result_json
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.result.schema import SCHEMA_FILE, sweep_schema
from perfkit.result.sweep import SCHEMA, SweepResult

DATA = Path(__file__).parent / "data"


def test_shipped_schema_is_the_generated_one():
    assert json.loads(SCHEMA_FILE.read_text()) == sweep_schema()


@pytest.mark.parametrize("name", ["v1-local.json", "v1-remote.json"])
def test_v1_files_load_and_round_trip_as_v2(name):
    result = load_result(DATA / name)
    assert isinstance(result, SweepResult) and result.schema == SCHEMA
    doc = json.loads(result_json(result))
    jsonschema.validate(doc, sweep_schema())
    assert decode_result(doc, "again") == result  # one codec, both ways


def test_v1_remote_zeros_that_were_never_measured_become_null():
    level = load_result(DATA / "v1-remote.json").levels[0]
    assert level.remote and level.guard is None
    assert level.counts.steps is None and level.counts.batched_tokens is None
    assert level.counts.preemptions is None  # not scraped: unknown, not 0
    assert level.kv.peak_blocks_used is None and level.kv.blocks_total is None
    assert all(r.preemptions is None for r in level.requests)
    assert level.counts.output_tokens == 12  # what the client did see stays


def test_v1_local_levels_gain_the_kv_usage_share():
    level = load_result(DATA / "v1-local.json").levels[0]
    assert not level.remote and level.counts.steps and level.counts.steps > 0
    kv = level.kv
    assert kv.blocks_total and kv.peak_blocks_used is not None
    assert kv.usage_peak == kv.peak_blocks_used / kv.blocks_total
    assert kv.source == "engine block pool" and kv.available


def test_a_wrong_type_names_its_path(tmp_path):
    doc = json.loads((DATA / "v1-local.json").read_text())
    doc["levels"][0]["counts"]["output_tokens"] = "many"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PerfkitError, match=r"bad\.json: malformed sweep result: "
                       r"result\.levels\[0\]\.counts\.output_tokens: expected an integer"):
        load_result(path)


def test_missing_and_foreign_documents_are_refused(tmp_path):
    doc = json.loads((DATA / "v1-local.json").read_text())
    del doc["levels"][0]["latency"]
    with pytest.raises(PerfkitError, match=r"levels\[0\]: missing 'latency'"):
        decode_result(doc, "x")
    with pytest.raises(PerfkitError, match="not a perfkit sweep result"):
        decode_result({"schema": "something/1"}, "x")


def test_codec_writes_nan_as_null_and_reads_ints_as_floats():
    level = load_result(DATA / "v1-local.json").levels[0]
    data = to_json(level)
    data["observed_concurrency"] = 2  # an int where a float is expected
    assert from_json(LevelResult, data).observed_concurrency == 2.0
    assert to_json({"x": float("nan")}) == {"x": None}
    with pytest.raises(ResultError, match="expected true or false"):
        from_json(LevelResult, data | {"repeat": 0, "kv": data["kv"] | {"available": 1}})


def test_load_point_labels():
    assert LoadPoint(concurrency=4).label == "concurrency 4"
    assert (LoadPoint(rate=2.5).short, LoadPoint(rate=2.5).slug) == ("2.5/s", "rate-2.5")
    assert LoadPoint(concurrency=4).short == "c=4"
    with pytest.raises(ValueError):
        LoadPoint()
