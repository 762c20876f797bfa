"""Several outputs per request in the fragmentation tool: the Engine replay's memory
saving on a hand-computed trace, contiguous policies reserving every output, the paper's
Fig. 15 range beside the profile's saving, and the JSON."""

from __future__ import annotations

import dataclasses
import json

import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.fragmentation.groups import expand, paper_range, replay_paged, trace_specs
from perfkit.fragmentation.trace import lengths_trace
from perfkit.replay.arrivals import OpenLoop
from perfkit.replay.trace import Trace


def one_request(n: int = 1, beam: int = 1) -> Trace:
    """A prompt of two whole blocks of 4, three outputs tokens each."""
    return Trace([8], [3], [0], [-1], 0, OpenLoop((0,)), 64, n=[n], beam_width=[beam])


def test_parallel_samples_save_what_they_share():
    prof = load_profile("default", Overrides(sets=("engine.max_num_batched_tokens=1000",)))
    # step 0: prefill 2 blocks, fork: 4 entries on 2 blocks (2 saved); step 1: each sample
    # opens its own block (6 entries on 4 blocks); step 2: done. saved 4 / needed 2+4+4
    r = replay_paged(prof, one_request(n=2), "paged-4", 4, 16, False, 0.5)
    assert (r.saved_block_steps, r.peak_shared_blocks, r.copy_on_writes) == (4, 2, 0)
    assert r.memory_saving == pytest.approx(4 / 10)
    alone = replay_paged(prof, one_request(), "paged-4", 4, 16, False, 0.5)
    assert alone.memory_saving == 0 and alone.copy_on_writes == 0


def test_contiguous_policies_reserve_every_output():
    tr = Trace([5, 7], [3, 2], [0, 1], [-1, -1], 0, OpenLoop((0, 2)), 64, n=[3, 1],
               beam_width=[1, 1])
    out = expand(tr)
    assert out.prompt_len == [5, 5, 5, 7] and out.priority == [0, 0, 0, 1]
    assert out.arrivals == OpenLoop((0, 0, 0, 2)) and not out.has_groups


def test_made_up_prompts_share_only_their_prefix():
    tr = Trace([6, 6, 5], [1, 1, 1], [0] * 3, [0, 0, -1], 4, OpenLoop((0,) * 3), 64, n=[2, 2, 2])
    a, b, c = trace_specs(tr, 512)
    assert a.prompt[:4] == b.prompt[:4] and a.prompt[4:] != b.prompt[4:]
    assert a.prompt[:4] != c.prompt[:4] and a.n == 2 and len(c.prompt) == 5


def test_outputs_per_request_come_from_the_profile():
    prof = load_profile("alpaca", Overrides(sets=(
        'workload.beam_width={kind="uniform", min=2, max=6}',)))
    tr = lengths_trace(prof, 200)
    plain = lengths_trace(load_profile("alpaca"), 200)
    assert tr.prompt_len == plain.prompt_len and tr.max_tokens == plain.max_tokens
    assert set(tr.beam_width) == {2, 3, 4, 5, 6} and tr.has_groups and not plain.has_groups


def test_the_paper_range_needs_the_opt13b_shape_and_a_paper_dataset():
    opt = load_profile("sharegpt", Overrides(model="opt-13b", sets=("workload.n=4",)))
    tr = lengths_trace(opt, 10)
    assert paper_range(opt, tr) == ("sharegpt parallel sampling", (0.162, 0.305))
    beams = dataclasses.replace(tr, n=[], beam_width=[2] * 10)
    assert paper_range(opt, beams) == ("sharegpt beam search", (0.443, 0.663))
    assert paper_range(load_profile("sharegpt", Overrides(sets=("workload.n=4",))), tr) is None


def test_cli_reports_sharing_beside_the_paper(cli, tmp_path):
    out = tmp_path / "f.json"
    result = cli("fragmentation", "--profile", "alpaca", "--model", "opt-13b",
                 "--kv-memory", "2GiB", "--requests", "60", "--block-sizes", "16",
                 "--set", "workload.n=2", "--jobs", "1", "--json", str(out), width=200)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "sharing (blocks in several tables" in text and "CoW" in text
    assert "Fig. 15 (OPT-13B, alpaca parallel sampling, widths 2-6): memory saving " \
           "6.1%-9.8%; paged-16 here" in text
    doc = json.loads(out.read_text())
    paged = next(p for p in doc["policies"] if p["name"] == "paged-16")
    assert 0 < paged["memory_saving"] < 0.5 and paged["copy_on_writes"] > 0
    assert doc["sharing"]["paper_fig15"] == {"what": "alpaca parallel sampling",
                                            "low": 0.061, "high": 0.098}
    assert doc["sharing"]["memory_saving"] == paged["memory_saving"]
    oracle = next(p for p in doc["policies"] if p["name"] == "oracle")
    assert oracle["memory_saving"] is None and oracle["finished"] == 120  # outputs


def test_closed_loops_refuse_several_outputs(cli):
    result = cli("fragmentation", "--arrivals", "closed", "--concurrency", "4",
                 "--set", "workload.n=2", "--requests", "10")
    assert result.exit_code == 2 and "not with several outputs" in result.stderr
