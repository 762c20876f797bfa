"""`perfkit sweep --set workload.n=4`: every output counted, blocks shared and saved,
copies on write, the same tokens as the unshared run; per-output TPOT."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path

import jsonschema
import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.async_engine import AsyncEngine
from perfkit.engine.engine import Engine
from perfkit.records import RequestRecord
from perfkit.workload import generate

SCHEMA = json.loads((Path(__file__).parents[2] / "perfkit/result/sweep.schema.json").read_text())


def sweep(cli, tiny, tmp_path: Path, *sets: str) -> dict:
    path = tmp_path / "r.json"
    args = [*tiny, "--concurrency", "2", "--no-samplers"]
    for s in ("workload.n=4", *sets):
        args += ["--set", s]
    result = cli("sweep", *args, "--json", str(path), width=200)
    assert result.exit_code == 0, result.stderr
    return {"doc": json.loads(path.read_text()), "out": " ".join(result.stdout.split())}


def test_n4_shares_blocks_and_the_unshared_run_pays_for_them(cli, tiny, tmp_path):
    on = sweep(cli, tiny, tmp_path / "on")
    off = sweep(cli, tiny, tmp_path / "off", "engine.block_sharing=false")
    jsonschema.validate(on["doc"], SCHEMA)
    a, b = on["doc"]["levels"][0], off["doc"]["levels"][0]
    assert a["counts"]["outputs"] == 4 * a["counts"]["requests"] == 24
    assert a["counts"]["output_tokens"] == b["counts"]["output_tokens"] == 24 * 8
    assert a["counts"]["pool_copy_on_writes"] > 0 and a["kv"]["peak_blocks_shared"] > 0
    assert a["kv"]["mean_blocks_saved"] > 0
    assert b["kv"]["peak_blocks_used"] > a["kv"]["peak_blocks_used"]
    assert b["counts"]["pool_copy_on_writes"] > a["counts"]["pool_copy_on_writes"]
    assert "Sharing (counts" in on["out"] and "memory saving" in on["out"]
    ids = {f["id"] for f in on["doc"]["findings"]}
    assert "outputs_share_blocks" in ids and "outputs_not_shared" not in ids
    assert "outputs_not_shared" in {f["id"] for f in off["doc"]["findings"]}
    req = a["requests"][-1]
    assert req["outputs"] == 4 and req["output_tokens"] == 32
    assert len(req["itl_s"]) == 4 * 7  # gaps within each output, pooled
    page = tmp_path / "r.html"
    assert cli("report", str(tmp_path / "on" / "r.json"), "--output", str(page)).exit_code == 0
    assert "<th>memory saving</th>" in page.read_text()


def _streams(sets: tuple[str, ...]) -> dict[int, dict[int, list[int]]]:
    """Each request's outputs' tokens as the async front door streamed them."""
    prof = load_profile("default", Overrides(sets=("engine.cpu_threads=1", *sets)))
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 6)
    out: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))

    async def main() -> None:
        async with AsyncEngine(Engine(prof)) as aeng:
            async def one(spec):
                async for ev in aeng.submit(spec):
                    out[spec.request_id][ev.index].append(ev.token)
            await asyncio.gather(*(one(s) for s in specs))

    asyncio.run(main())
    return {r: dict(v) for r, v in out.items()}


@pytest.mark.parametrize("n", ["workload.n=3", "workload.beam_width=3"])
def test_streams_are_the_unshared_runs_tokens(n):
    sets = (n, "workload.output_len.kind=\"fixed\"", "workload.output_len.mean=6",
            "workload.output_len.min=6", "workload.output_len.max=6")
    shared = _streams(sets)
    assert shared == _streams((*sets, "engine.block_sharing=false"))
    assert all(len(outs) == 3 and all(len(t) == 6 for t in outs.values())
               for outs in shared.values())


def test_a_request_with_outputs_times_each_output_on_its_own():
    rec = RequestRecord(0, 0.0, 5, 6, first_token_s=1.0, token_times_s=[1.0, 2.0, 3.0],
                        finish_s=4.0, num_outputs=2, more_token_times_s=[[1.0, 2.5, 4.0]])
    assert rec.tpot_s == pytest.approx((1.0 + 1.5) / 2)  # each output's own, then the mean
    assert rec.itl_s == [1.0, 1.0, 1.5, 1.5] and rec.ttft_s == 1.0 and rec.e2e_s == 4.0
