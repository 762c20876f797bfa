"""Remote-only findings: burst delivery, unplanned prefix hits."""

from __future__ import annotations

from levels import level

from perfkit.config.profile import load_profile
from perfkit.summary.remote_findings import burst_delivery, unplanned_prefix_hits

STREAM = {"chunks": 10, "output_tokens": 80, "tokens_per_chunk": 8.0, "itl_unit": "chunk",
          "burst_requests": 9, "burst_share": 0.9, "burst_span_s": 0.001, "degenerate": True}


def test_burst_delivery_names_the_levels() -> None:
    lv = level({"concurrency": 8, "stream": STREAM})
    found = burst_delivery([lv], load_profile("default"))
    assert [f.id for f in found] == ["burst_delivery"]
    assert found[0].evidence["levels"] == ["concurrency 8"]
    calm = level({"concurrency": 1, "stream": {**STREAM, "degenerate": False}})
    assert burst_delivery([calm], load_profile("default")) == []


def test_hits_without_shared_prefixes_are_unplanned() -> None:
    profile = load_profile("default")
    hit = level({"concurrency": 2, "prefix_hit_rate": 0.8,
                 "counts": {"completed": 10, "prompt_tokens": 1000, "cached_tokens": 800}})
    found = unplanned_prefix_hits([hit], profile)
    assert [f.id for f in found] == ["unplanned_prefix_hits"]
    assert found[0].evidence["hit_tokens"] == 800
    clean = level({"concurrency": 2, "prefix_hit_rate": 0.0,
                   "counts": {"completed": 10, "prompt_tokens": 1000, "cached_tokens": 0}})
    assert unplanned_prefix_hits([clean], profile) == []


def test_shared_prefix_hits_are_planned() -> None:
    profile = load_profile("shared-prefix")
    sp = profile.workload.shared_prefix
    planned = int(10 * sp.length * sp.share)
    lv = level({"concurrency": 2, "prefix_hit_rate": 0.5,
                "counts": {"completed": 10, "prompt_tokens": 10 * sp.length * 2,
                           "cached_tokens": planned}})
    assert unplanned_prefix_hits([lv], profile) == []
