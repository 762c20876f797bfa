"""Each format reads from a small file; a broken record names the file, line and field."""

from __future__ import annotations

import json

import pytest

from perfkit.config.workload import LengthDist
from perfkit.datasets.load import detect_format, load_records
from perfkit.datasets.records import MOONCAKE_BLOCK, DatasetError
from perfkit.datasets.slices import load_tokenizer
from perfkit.datasets.specs import SpecBuilder, dataset_specs, scale_arrivals


@pytest.mark.parametrize("fmt", ["sharegpt", "jsonl", "mooncake", "burstgpt"])
def test_each_format_is_recognised_and_read(files, fmt):
    assert detect_format(files[fmt]) == fmt
    records = load_records(files[fmt])
    assert len(records) == 24


def test_sharegpt_turns_carry_the_history(files):
    records = load_records(files["sharegpt"])
    first, second = records[0], records[1]
    assert (first.conversation, first.turn, second.turn) == (0, 0, 1)
    assert second.prompt_text.startswith(first.prompt_text)  # history, then the new turn
    assert first.output_text and first.output_len is None


def test_timestamps_and_lengths(files):
    moon = load_records(files["mooncake"])
    assert moon[1].timestamp_s == pytest.approx(0.137) and moon[0].prompt_len == 700
    burst = load_records(files["burstgpt"])
    assert burst[2].timestamp_s == 1.0 and burst[2].prompt_len == 22
    assert all(r.prompt_len for r in burst)  # the 0-token failed request is skipped


def build(path, tokenizer=None, vocab=512):
    return SpecBuilder(path, vocab, LengthDist(mean=8), seed=0, tokenizer=tokenizer)


def test_mooncake_hash_ids_become_shared_token_blocks(files):
    specs = dataset_specs(load_records(files["mooncake"]), build(files["mooncake"]))
    a, b = specs[0].prompt, specs[1].prompt
    assert a[:MOONCAKE_BLOCK] == b[:MOONCAKE_BLOCK]  # hash id 0 in both
    assert a[MOONCAKE_BLOCK:] != b[MOONCAKE_BLOCK:len(a)]
    assert (len(a), specs[0].max_tokens, specs[0].arrival_s) == (700, 5, 0.0)
    assert specs[1].arrival_s == pytest.approx(0.137)


def test_token_ids_fold_into_the_vocabulary(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"prompt": [5, 600, 5, 600]}) + "\n")
    (spec,) = dataset_specs(load_records(path), build(path, vocab=512))
    assert spec.prompt == (5, 89, 5, 89) and all(0 < t < 512 for t in spec.prompt)
    assert spec.max_tokens == 8  # no output length: the profile's distribution


def test_text_needs_a_tokenizer_and_uses_it(files, tokenizer_dir):
    path = files["sharegpt"]
    with pytest.raises(DatasetError, match=r"chats\.json:1: prompt: text needs a tokenizer"):
        dataset_specs(load_records(path), build(path))
    specs = dataset_specs(load_records(path), build(path, load_tokenizer(str(tokenizer_dir))))
    assert specs[0].prompt_len == 20 and specs[0].max_tokens == 6
    assert specs[1].prompt[:20] == specs[0].prompt  # the next turn extends the history


def test_scaled_arrivals_keep_the_pattern_at_the_rate(files):
    specs = dataset_specs(load_records(files["mooncake"]), build(files["mooncake"]))
    scaled = scale_arrivals(specs, rate=100.0)
    assert scaled[-1].arrival_s == pytest.approx(len(specs) / 100.0 - 0.01, rel=1e-9)
    ratios = {round(s.arrival_s / max(o.arrival_s, 1e-9), 6) for s, o in
              zip(scaled[1:], specs[1:])}
    assert len(ratios) == 1  # one factor: bursts and lulls kept


@pytest.mark.parametrize(("name", "text", "where"), [
    ("a.jsonl", '{"prompt": [1, 2]}\n{"prompt": [1, "x"]}\n', r"a\.jsonl:2: prompt\[1\]"),
    ("a.jsonl", '{"prompt": [1]}\nnot json\n', r"a\.jsonl:2: not JSON"),
    ("a.jsonl", '{"prompt": 5}\n', r"a\.jsonl:1: prompt: expected text or a list"),
    ("a.jsonl", '{"prompt": [1], "output_len": -2}\n', r"a\.jsonl:1: output_len"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
     '{"timestamp": 1, "input_length": 10}\n', r"m\.jsonl:2: output_length: missing"),
    ("m.jsonl", '{"timestamp": -1, "input_length": 10, "output_length": 2}\n',
     r"m\.jsonl:1: timestamp: expected a time"),
    ("b.csv", "Timestamp,Model,Request tokens,Response tokens\n1,x,ten,2\n",
     r"b\.csv:2: Request tokens: expected a number"),
    ("b.csv", "Timestamp,Model,Response tokens\n1,x,2\n", r"b\.csv:1: Request tokens: column"),
    ("c.json", '[{"conversations": [{"from": "robot", "value": "hi"}]}]',
     r"c\.json:1: conversations\[0\]"),
    ("c.json", '{"not": "a list"}', r"c\.json: expected a JSON list"),
])
def test_a_broken_record_names_file_line_and_field(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DatasetError, match=where):
        load_records(path)


def test_missing_folder_and_empty_files(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_records(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="is a folder"):
        load_records(tmp_path)
    (tmp_path / "e.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no records"):
        load_records(tmp_path / "e.jsonl", "jsonl")
