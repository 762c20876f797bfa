"""The load generator holds back full collections while it measures (loadgen/gc_hold)."""

from __future__ import annotations

import gc
import weakref

from perfkit.loadgen import gc_hold


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def test_no_full_collection_inside_and_one_on_the_way_out() -> None:
    before = gc.get_threshold()
    with gc_hold.held():
        start = _full_collections()
        kept = [[i] for i in range(300_000)]  # survivors: would trigger full collections
        assert _full_collections() == start
        assert gc.get_threshold()[2] == gc_hold.NEVER
        young = gc.get_stats()[0]["collections"]
        junk = [[j] for j in range(10_000)]
        del junk
        assert gc.get_stats()[0]["collections"] > young  # young collections stay on
    assert _full_collections() == start + 1
    assert gc.get_threshold() == before
    assert len(kept) == 300_000


def test_thresholds_come_back_after_an_error() -> None:
    before = gc.get_threshold()
    try:
        with gc_hold.held():
            raise RuntimeError("a level failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before


def test_a_cycle_made_inside_is_freed_by_the_time_it_ends() -> None:
    class Node:
        other: object

    with gc_hold.held():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
    assert ref() is None
