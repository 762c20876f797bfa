"""`perfkit fragmentation`: bad input exits 2 with one line naming the option; JSON output."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def frag(cli):
    """`perfkit fragmentation ARGS` on the real app."""
    return lambda *args: cli("fragmentation", *args, width=220)


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu", "rtx4090"], "--gpu: unknown GPU 'rtx4090'"),
    (["--block-sizes", "8,x"], "--block-sizes: cannot read '8,x'"),
    (["--block-sizes", "0,16"], "--block-sizes: expected finite positive values"),
    (["--block-sizes", "2048"], "--block-sizes: 2048 is larger than 1024"),
    (["--kv-memory", "lots"], "--kv-memory: cannot read 'lots' as a size"),
    (["--kv-memory", "1B"], "--kv-memory: '1B' holds no token"),
    (["--kv-memory", "8KiB", "--block-sizes", "16"], "holds no block of 16 tokens"),
    (["--kv-memory", "16KiB", "--block-sizes", "16"],
     "holds no block of 16 tokens but the null block (engine.null_block)"),
    (["--simulate", "--live"], "--simulate and --live exclude each other"),
    (["--kv-memory", "1GiB", "--gpu", "h100"], "--kv-memory and --gpu both set a KV budget"),
    (["--requests", "0"], "--requests: expected 1 to 1,000,000"),
    (["--arrivals", "poisson"], "--arrivals: expected saturate, profile or closed"),
    (["--arrivals", "closed"], "--concurrency: give it with --arrivals closed"),
    (["--concurrency", "4"], "--concurrency: give it with --arrivals closed"),
    (["--arrivals", "closed", "--concurrency", "4", "--live"],
     "--arrivals closed: the replays only"),
    (["--arrivals", "closed", "--concurrency", "4", "--client-delay-steps", "-1"],
     "client_delay_steps"),
    (["--jobs", "0"], "--jobs: expected 1 to 256"),
    (["--profile", "nope"], "no built-in profile named 'nope'"),
    (["--set", "engine.block_size=0"], "--set engine.block_size"),
    (["--json", "/etc/passwd/out.json", "--requests", "5"], "/etc/passwd is not a folder"),
])
def test_bad_input_is_one_clear_line(frag, args, message):
    result = frag(*args)
    assert result.exit_code == 2, (args, result.stdout)
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_simulate_prints_table_and_writes_json(frag, tmp_path):
    out = tmp_path / "frag.json"
    result = frag("--profile", "sharegpt", "--model", "opt-13b", "--kv-memory", "12GiB",
                  "--requests", "400", "--block-sizes", "8,16,32", "--jobs", "1",
                  "--json", str(out))
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())  # the console wraps at its own width
    for part in ("reserve-max", "pow2", "oracle", "paged-16", "paged-32", "paged-16+prefix",
                 "tok/occ", "block size: 16", "verdicts"):
        assert part in text
    doc = json.loads(out.read_text())
    assert not list(tmp_path.glob(".frag.json.*"))  # the temp file was renamed away
    assert doc["schema"] == "perfkit.fragmentation/1"
    names = [p["name"] for p in doc["policies"]]
    assert names == ["reserve-max", "pow2", "oracle", "paged-8", "paged-16", "paged-32",
                     "paged-16+prefix"]
    for p in doc["policies"]:
        shares = [p[k] for k in ("used", "reserved", "internal", "external", "free")]
        assert sum(shares) == pytest.approx(1.0) and min(shares) >= 0
        assert {"shared_saving", "peak_sequences", "peak"} <= set(p)
        assert ("block_size" in p) == (p["kind"] == "paged")
    assert doc["recommendation"]["block_size"] == 16
    assert doc["live"] is None and doc["timings"]["total_s"] > 0


CLOSED_40 = ("--requests", "64", "--block-sizes", "32", "--arrivals", "closed",
             "--concurrency", "8", "--set", "engine.block_size=32", "--set",
             "engine.num_blocks=40", "--set", "engine.max_num_batched_tokens=2048", "--jobs", "1")


def test_a_client_delay_gives_the_range_down_to_no_delay(frag, tmp_path):
    """The replay at the delay and the same replay with none: the two ends of the range a
    real front end lands in (tests/vllm/test_vllm_capacity.py)."""
    docs = {}
    for delay in (0, 40):
        out = tmp_path / f"d{delay}.json"
        result = frag(*CLOSED_40, "--client-delay-steps", str(delay), "--json", str(out))
        assert result.exit_code == 0, result.stderr
        docs[delay] = json.loads(out.read_text())
        text = " ".join(result.stdout.split())
        assert ("client delay:" in text) == (delay > 0)
    preempted = {d: next(p["preempted"] for p in doc["policies"] if p["name"] == "paged-32")
                 for d, doc in docs.items()}
    assert docs[0]["trace"]["no_delay_preemptions"] is None
    assert docs[40]["trace"]["no_delay_preemptions"] == preempted[0] > preempted[40]
    assert (f"paged-32 preempts {preempted[40]} times at 40 steps, {preempted[0]} with none"
            in text)


def test_gpu_budget_in_header(frag):
    result = frag("--profile", "sharegpt", "--model", "llama3-8b", "--gpu", "h100",
                  "--requests", "50", "--block-sizes", "16", "--jobs", "1")
    assert result.exit_code == 0, result.stderr
    assert "h100 x 0.9 - weights" in " ".join(result.stdout.split())


def test_live_reports_the_engine_pool(frag, tmp_path):
    try:
        import perfkit.engine.engine  # noqa: F401
    except ImportError as err:
        pytest.skip(f"perfkit.engine.engine does not import yet: {err}")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path / "live.json"
        result = frag("--live", "--requests", "4", "--block-sizes", "16", "--jobs", "1",
                      "--set", "engine.num_blocks=64", "--set", "workload.output_len.max=20",
                      "--json", str(out))
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "engine BlockPool over" in text
    assert "engine-16 (live)" in text and "process RSS" in text
    live = json.loads(out.read_text())["live"]
    assert live["agreement"][0]["exact"]
    assert live["counters"]["allocations"] > 0 and len(live["timeline"]) == live["engine"]["steps"]


def test_live_refuses_a_budget_it_cannot_allocate(frag):
    try:
        import perfkit.engine.engine  # noqa: F401
    except ImportError as err:
        pytest.skip(f"perfkit.engine.engine does not import yet: {err}")
    for args in (["--kv-memory", "100TiB"], ["--model", "llama3-8b", "--gpu", "h200"]):
        result = frag("--live", "--requests", "2", *args)
        assert result.exit_code == 2, args
        assert "--live would allocate" in result.stderr


def test_bar_is_fixed_width_and_drops_slivers():
    from perfkit.fragmentation.render import bar

    shares = {"used": 0.213, "reserved": 0.006, "internal": 0.0, "external": 0.0, "free": 0.781}
    assert bar(shares, 16).plain == "███" + "·" * 13
    full = {"used": 0.19, "reserved": 0.12, "internal": 0.597, "external": 0.088, "free": 0.005}
    assert bar(full, 16).plain == "███▓▓▒▒▒▒▒▒▒▒▒▒░"


def test_block_sizes_without_the_profiles_own(frag, tmp_path):
    """--block-sizes may leave out the profile's block size: the judgement uses the
    replay at the profile's size that runs anyway (paged-16+prefix here)."""
    out = tmp_path / "f.json"
    result = frag("--block-sizes", "3", "--requests", "50", "--json", str(out))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "paged-16+prefix" in json.loads(out.read_text())["limited_by"]["reason"]
