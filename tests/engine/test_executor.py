"""Executors: the null executor runs Engine.step's one loop with no tensors and takes the
same scheduling decisions, block counts and KV timeline as the model; the bookkeeping
modules and the null engine never import torch."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import astuple

import pytest

from perfkit.config.profile import Overrides, load_profile, pool_blocks
from perfkit.config.units import cdiv
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.engine.guard.grammar import validate
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.workload import RequestSpec, generate

LOOPS = ("engine.guard_loop_ngram=8", "engine.guard_loop_repeats=4")


def profile(*sets: str, name: str = "shared-prefix"):
    return load_profile(name, Overrides(sets=("engine.cpu_threads=1", 'engine.device="cpu"',
                                              *sets)))


def specs(prof, n: int) -> list[RequestSpec]:
    return generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len,
                    num_requests=n)


def trace(engine: Engine, reqs: list[RequestSpec]) -> dict:
    """Everything about a run but token values and times."""
    plans: list[tuple] = []

    def on_step(out: SchedulerOutput) -> None:
        plans.append((tuple((i.seq.seq_id, i.num_new_tokens, i.samples) for i in out.scheduled),
                      tuple(s.seq_id for s in out.preempted), tuple(out.copies)))

    engine.on_step = on_step
    seqs = [engine.add_request(spec)[0] for spec in reqs]
    while engine.has_work:
        engine.step()
    st = engine.stats
    return {
        "plans": plans,
        "timeline": [astuple(k)[1:] for k in st.kv_timeline],  # without the time
        "counters": engine.pool.counters,
        "stats": (st.steps, st.batched_tokens, st.sampled_tokens, st.guard),
        "preemptions": engine.scheduler.num_preemptions,
        "outputs": [(s.num_output_tokens, s.finish_reason, s.num_cached_tokens) for s in seqs],
    }


@pytest.mark.parametrize("sets", [
    ("engine.num_blocks=40",),  # preemptions
    ("engine.num_blocks=1024", "engine.max_num_batched_tokens=37"),  # chunked prefill
    ("engine.prefix_caching=false", "engine.num_blocks=64"),
])
def test_null_engine_schedules_like_the_model(sets):
    prof = profile(*sets)
    reqs = specs(prof, 16)
    real = trace(Engine(prof), reqs)
    null = trace(Engine(prof, executor=null_executor()), reqs)
    assert real["plans"] and real == null
    if "engine.num_blocks=40" in sets:
        assert real["preemptions"] > 0 and real["counters"].hits > 0


def test_null_engine_device_and_reset():
    prof = profile("engine.num_blocks=40")
    engine = Engine(prof, executor=null_executor())
    assert engine.device == "none" and engine.block_size == prof.engine.block_size
    assert engine.kv_spec == KVSpec.from_profile(prof)
    reqs = specs(prof, 8)
    first = engine.run_to_completion(reqs)
    counters = engine.pool.counters
    engine.reset()
    assert engine.stats.steps == 0 and engine.pool.num_free_blocks == engine.pool.num_blocks
    assert engine.run_to_completion(reqs) == first and engine.pool.counters == counters


def test_null_tokens_are_deterministic_and_never_loop():
    prof = profile(*LOOPS, name="default")
    reqs = specs(prof, 12)
    a = Engine(prof, executor=null_executor()).run_to_completion(reqs)
    b = Engine(prof, executor=null_executor()).run_to_completion(reqs)
    assert a == b
    assert all(len(out) == spec.max_tokens for out, spec in zip(a.values(), reqs))
    fixed = Engine(prof, executor=null_executor(5)).run_to_completion(reqs[:2])
    assert all(out == [5, 5, 5, 5] for out in fixed.values())  # cut there as a loop


def test_null_tool_calls_take_legal_tokens_and_validate():
    prof = profile(name="tool-calls")
    engine = Engine(prof, executor=null_executor())
    seqs = [engine.add_request(spec)[0] for spec in specs(prof, 16)]
    while engine.has_work:
        engine.step()
    calls = [s for s in seqs if s.tool_call]
    assert calls
    for s in calls:
        out = engine.vocab.detokenize(s.token_ids[s.num_prompt_tokens:])
        assert s.finish_reason == "stop" and validate(out) is None, out
    assert engine.stats.guard.invalid_tool_calls == 0
    assert engine.stats.guard.tool_calls == len(calls)


def test_engine_refuses_a_device_beside_an_executor():
    with pytest.raises(ValueError, match="executor"):
        Engine(profile(), device="cpu", executor=null_executor())


def test_null_token_must_be_in_the_vocabulary():
    with pytest.raises(ValueError, match="vocabulary"):
        Engine(profile(), executor=null_executor(1 << 20))


# -- torch only where tensors are --------------------------------------------------------
_NO_TORCH = r"""
import json, sys
import perfkit.engine.blocks, perfkit.engine.kv_manager, perfkit.engine.scheduler
import perfkit.engine.sequence, perfkit.engine.engine, perfkit.engine.executor
import perfkit.engine.kv_spec, perfkit.engine.async_engine
import perfkit.engine.guard.dfa, perfkit.engine.guard.grammar, perfkit.engine.guard.guard
import perfkit.fragmentation.exact
imported = "torch" in sys.modules
from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.fragmentation.exact import replay_scheduler
from perfkit.workload import generate
prof = load_profile("tool-calls", Overrides(sets=("engine.num_blocks=40",)))
specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 12)
engine = Engine(prof, executor=null_executor())
engine.run_to_completion(specs)
replay = replay_scheduler(prof, specs, [0] * len(specs))
print(json.dumps([imported, "torch" in sys.modules, str(engine.device), engine.stats.steps,
                  replay.result.num_finished]))
"""


def test_bookkeeping_and_the_null_engine_never_import_torch():
    out = subprocess.run([sys.executable, "-c", _NO_TORCH], capture_output=True, text=True,
                         check=True).stdout
    on_import, after_run, device, steps, finished = json.loads(out)
    assert not on_import and not after_run
    assert device == "none" and steps > 0 and finished == 12


# -- one count, one spec -----------------------------------------------------------------
def test_kv_spec_checks_itself_once():
    spec = KVSpec(10, 16, 2, 2, 32, "float16")
    assert spec.num_slots == 160 and spec.bytes_per_block == 2 * 2 * 16 * 2 * 32 * 2
    assert spec.nbytes == 10 * spec.bytes_per_block
    for bad, match in (((0, 16, 2, 2, 32), "num_blocks"), ((1, 0, 2, 2, 32), "block_size"),
                       ((1, 16, 2, 0, 32), "num_kv_heads")):
        with pytest.raises(ValueError, match=match):
            KVSpec(*bad)
    with pytest.raises(ValueError, match="dtype"):
        KVSpec(1, 16, 2, 2, 32, "int8")
    prof = profile()
    assert KVSpec.from_profile(prof).nbytes == (
        pool_blocks(prof) * prof.engine.block_size * prof.model.kv_bytes_per_token)


def test_cdiv():
    assert [cdiv(n, 16) for n in (0, 1, 15, 16, 17, 32, 33)] == [0, 1, 1, 1, 2, 2, 3]


@pytest.mark.parametrize("name", ["default", "sharegpt"])
def test_num_parameters_counts_the_model_tensors(name):
    import torch

    from perfkit.engine.layers.model_executor import ModelExecutor

    prof = load_profile(name, Overrides(sets=("engine.num_blocks=4",)))
    model = ModelExecutor(prof, KVSpec.from_profile(prof), None, "cpu").model
    tensors: list[torch.Tensor] = [model.embed, model.lm_head, model.final_norm]
    for w in model.layers:
        tensors += [w.attn_norm, w.wqkv, w.wo, w.mlp_norm, w.w_gate_up, w.w_down]
    assert sum(t.numel() for t in tensors) == prof.model.num_parameters
