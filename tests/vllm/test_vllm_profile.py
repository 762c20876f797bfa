"""--server-profile against a real vLLM (CPU build) started with its torch profiler: the
profiled level's measured phase becomes a trace in the server's folder, named after the
level, and the result lists it. The rest of the sweep is not profiled."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from vllm_server import MODEL_NAME, VllmServer

# Prompts of another seed and length than test_vllm_target's: no prefix blocks shared.
SMALL = ("--seed", "4242", "--set", "workload.prompt_len.kind=fixed", "--set",
         "workload.prompt_len.mean=40", "--set", "workload.output_len.kind=fixed", "--set",
         "workload.output_len.mean=16")


def test_server_profile_writes_a_trace_of_the_chosen_level(vllm: VllmServer, tmp_path):
    assert vllm.profile_dir is not None
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--target", f"{vllm.base}/v1",
           "--model", MODEL_NAME, "--concurrency", "1,2", "--requests", "4", "--warmup", "1",
           "--no-samplers", "--server-profile", "2", "--server-profile-dir",
           str(vllm.profile_dir), "--json", str(out), "--timeout", "120", *SMALL]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = json.loads(out.read_text())["levels"]
    assert first["server_profile"] is None
    prof = second["server_profile"]
    assert prof["written"], prof["message"]
    traces = [Path(f) for f in prof["trace_files"] if f.endswith(".pt.trace.json.gz")]
    assert traces and all(t.name.startswith("perfkit-level-2_") for t in traces)
    doc = json.loads(gzip.decompress(traces[0].read_bytes()))
    assert doc["traceEvents"], "an empty trace"
    print(f"{traces[0]}: {traces[0].stat().st_size} bytes, {len(doc['traceEvents'])} events")
    assert "server profile, concurrency 2: the server wrote" in done.stderr
