from perfkit.records import RequestRecord
from perfkit.stacks.probe import ProbeData
from perfkit.summary.tail_breakdown import tail_section
from perfkit.summary.tail_rules import tail_cause


def _rec(i: int, first: float, finish: float) -> RequestRecord:
    return RequestRecord(i, arrival_s=0.0, prompt_tokens=4, output_tokens=11,
                         first_token_s=first, finish_s=finish, scheduled_s=0.0)


def _section(prefill_every: int, gc: list[tuple[float, float]]):
    """100 steps of 10 ms from t=0; 100 requests, request 99 decodes over steps 50..99."""
    starts = [i * 0.01 for i in range(100)]
    ends = [s + 0.009 for s in starts]
    prefill = [1 if i % prefill_every == 0 else 0 for i in range(100)]
    recs = [_rec(i, 0.01, 0.11 + i * 0.0001) for i in range(99)] + [_rec(99, 0.5, 1.0)]
    probe = ProbeData(gc_start_s=[a for a, _ in gc], gc_end_s=[b for _, b in gc])
    return tail_section(recs, starts, ends, prefill, probe, 0.0)


def test_tail_request_counts_interference_steps() -> None:
    sec = _section(prefill_every=2, gc=[])
    tail, median = sec.group("tpot", "tail"), sec.group("tpot", "median")
    assert tail is not None and median is not None
    assert tail.num_requests == 1  # at or above p99 of 100 (perfkit.stats): the slowest
    assert tail.cause("prefill_interference").count == 25  # every other step of 50..99
    assert median.cause("prefill_interference").count == 5


def test_gc_in_the_tail_is_named() -> None:
    sec = _section(prefill_every=1000, gc=[(0.5 + k * 0.05, 0.54 + k * 0.05) for k in range(10)])
    tail = sec.group("tpot", "tail")
    assert tail is not None and tail.cause("gc").count == 10
    from perfkit.result.level import LevelResult  # noqa: F401  (the field exists)

    class Lv:
        tail = sec
        requests = [type("R", (), {"warmup": False})()] * 100
        point = type("P", (), {"label": "c=1"})()

    from perfkit.config.profile import Overrides, load_profile

    tight = load_profile("default", Overrides(sets=("slo.ttft_s=0.001", "slo.tpot_s=0.001")))
    found = tail_cause([Lv()], tight)  # type: ignore[list-item]
    ids = [f.id for f in found]
    assert "p99_tpot_gc" in ids



def test_a_tail_within_the_slo_is_info_and_beyond_it_a_warning():
    from perfkit.config.profile import Overrides, load_profile

    sec = _section(prefill_every=1000, gc=[(0.5 + k * 0.05, 0.54 + k * 0.05) for k in range(10)])

    class Lv:
        tail = sec
        requests = [type("R", (), {"warmup": False})()] * 100
        point = type("P", (), {"label": "c=1"})()

    def severity(*sets: str) -> str:
        found = tail_cause([Lv()], load_profile("default", Overrides(sets=sets)))  # type: ignore[list-item]
        return next(f.severity for f in found if f.id == "p99_tpot_gc")

    assert severity() == "info"  # p99 TPOT far inside the default 0.2 s target
    assert severity("slo.tpot_s=0.001") == "warning"


def test_tpot_groups_compare_per_output_token_not_whole_windows() -> None:
    # 99 median requests decode 40 tokens over 0.40 s (10 ms a token); the tail request
    # decodes 3 tokens over 0.09 s (45 ms a token) inside a GC pause: its window is the
    # shorter one, its TPOT 4.5x the median's. Whole windows said "no slower".
    starts = [i * 0.01 for i in range(100)]
    ends = [s + 0.009 for s in starts]
    recs = [RequestRecord(i, arrival_s=0.0, prompt_tokens=4, output_tokens=41,
                          first_token_s=0.01, finish_s=0.41 + i * 1e-5, scheduled_s=0.0)
            for i in range(99)]
    recs.append(RequestRecord(99, arrival_s=0.0, prompt_tokens=4, output_tokens=3,
                              first_token_s=0.5, finish_s=0.59, scheduled_s=0.0))
    probe = ProbeData(gc_start_s=[0.5], gc_end_s=[0.58])
    sec = tail_section(recs, starts, ends, [0] * 100, probe, 0.0)
    tail, median = sec.group("tpot", "tail"), sec.group("tpot", "median")
    assert tail is not None and median is not None
    assert tail.num_requests == 1  # at or above p99 of 100: request 99
    assert abs(tail.window_s - 0.045) < 1e-3  # its TPOT
    assert abs(median.window_s - 0.01) < 1e-4
    assert abs(tail.cause("gc").seconds - 0.04) < 1e-9  # 80 ms over its 2 intervals
    from perfkit.summary.tail_rules import dominant
    assert dominant(tail, median) == "gc"
