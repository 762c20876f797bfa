"""sweep --target A --lockstep S beside sweep --target B --lockstep S: a duet of two
deployments, whole levels alternating between them (ABBA), one result file a side."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys


def _sweep(url: str, sock, out) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--target", url, "--concurrency", "1,2",
           "--requests", "4", "--warmup", "0", "--repeats", "2", "--set",
           "sweep.min_requests_per_client=0", "--lockstep", str(sock), "--json", str(out),
           "--format", "json"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_two_targets_in_lockstep_take_whole_levels_in_turn(stub, tmp_path):
    a, b = stub(chunk_gap_s=0.002), stub(chunk_gap_s=0.002)
    sock = tmp_path / "duet.sock"
    procs = [_sweep(s.url, sock, tmp_path / f"{n}.json") for s, n in ((a, "a"), (b, "b"))]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    for name in ("a", "b"):
        doc = json.loads((tmp_path / f"{name}.json").read_text())
        assert doc["complete"] and len(doc["levels"]) == 4 and doc["lockstep"]["handoffs"] > 0
    # every request of one server's level arrives before the other's level starts: the
    # arrivals, labelled by server, switch server only between levels (4 levels a side)
    seen = sorted([(t, "a") for t in a.cfg.seen_at] + [(t, "b") for t in b.cfg.seen_at])
    switches = sum(x[1] != y[1] for x, y in itertools.pairwise(seen))
    assert len(seen) == 2 * 4 * 4
    assert switches <= 8, [s for _, s in seen]
