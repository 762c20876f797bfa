"""What counts as a dominant tail cause: explains the extra time AND is what the tail mostly is."""

from perfkit.records import RequestRecord
from perfkit.result.tail import CAUSES, TailCause, TailGroup, TailSection
from perfkit.stacks.probe import ProbeData
from perfkit.summary.tail_breakdown import tail_section
from perfkit.summary.tail_rules import dominant, tail_cause

MS = 1e-3


def _group(metric: str, which: str, window_ms: float, steps: float = 0.0, at_start: int = 0,
           n: int = 3, prompt: float = 0.0, **causes: tuple[float, float]) -> TailGroup:
    """causes: name -> (count, ms), each a mean per request; the rest zero, except GIL and
    lock waits: not measured unless given (a sweep without --contention)."""
    made = [TailCause(c, None, None) if c in ("gil", "lock") and c not in causes else
            TailCause(c, causes.get(c, (0.0, 0.0))[0], causes.get(c, (0.0, 0.0))[1] * MS)
            for c in CAUSES]
    return TailGroup(metric, which, window_ms * MS, n, window_ms * MS, made, steps=steps,
                     at_start=at_start, prompt_tokens=prompt)


def _finding(tail_group: TailGroup, median: TailGroup):
    class Lv:
        tail = TailSection(steps=None, groups=[tail_group, median])
        requests = [type("R", (), {"warmup": False})()] * 100
        point = type("P", (), {"label": "c=8"})()

    from perfkit.config.profile import load_profile

    found = tail_cause([Lv()], load_profile("default"))  # type: ignore[list-item]
    return next(f for f in found if f.id.startswith(f"p99_{tail_group.metric}_"))


def test_interference_in_a_few_steps_is_a_share_not_the_cause() -> None:
    # A clean run's TPOT tail (measured: 18-35% of the tail's decode steps carry a chunk,
    # filling 22-37% of its time per token): it explains most of the extra, the tail is not
    # mostly it.
    tail = _group("tpot", "tail", 3.5, steps=20, prefill_interference=(6, 1.1))
    median = _group("tpot", "median", 2.6, steps=30, n=40, prefill_interference=(6, 0.5))
    assert dominant(tail, median) is None
    f = _finding(tail, median)
    assert f.id == "p99_tpot_mixed" and "fills 31%" in f.message and "30% of their steps" \
        in f.message


def test_interference_in_most_steps_is_named() -> None:
    # A tiny token budget: every decode step carries a chunk, tail and median alike.
    tail = _group("tpot", "tail", 3.5, steps=20, prefill_interference=(20, 1.1))
    median = _group("tpot", "median", 2.6, steps=30, n=40, prefill_interference=(30, 0.5))
    assert dominant(tail, median) == "prefill_interference"
    f = _finding(tail, median)
    assert f.id == "p99_tpot_prefill_interference"
    assert "100% of their decode steps carry other requests' prefill chunks" in f.message


def test_a_cause_filling_most_of_the_window_is_named() -> None:
    tail = _group("tpot", "tail", 46.4, steps=3, gc=(1, 32.6))
    median = _group("tpot", "median", 2.6, steps=30, n=40)
    assert dominant(tail, median) == "gc"


def test_the_start_burst_queue_is_not_a_steady_state_queue() -> None:
    # A clean closed loop at c=8: the slowest first tokens are the level's first arrivals.
    tail = _group("ttft", "tail", 26.7, at_start=3, queue=(1, 15.7), own_prefill=(1, 11.0))
    median = _group("ttft", "median", 4.5, n=40, queue=(1, 0.22), own_prefill=(1, 4.3))
    assert dominant(tail, median) is None
    f = _finding(tail, median)
    assert f.id == "p99_ttft_mixed"
    assert "3 of the 3 tail requests arrived at the level's start" in f.message
    assert "not a steady-state queue" in f.message


def test_a_queue_the_median_requests_share_is_named_even_at_the_start() -> None:
    # A tiny token budget: every request queues, the tail longest.
    tail = _group("ttft", "tail", 317, at_start=3, queue=(1, 279), own_prefill=(1, 38))
    median = _group("ttft", "median", 183, n=40, queue=(1, 150), own_prefill=(1, 33))
    assert dominant(tail, median) == "queue"


def test_a_queue_after_the_start_is_named() -> None:
    tail = _group("ttft", "tail", 26.7, at_start=1, queue=(1, 15.7), own_prefill=(1, 11.0))
    median = _group("ttft", "median", 4.5, n=40, queue=(1, 0.22), own_prefill=(1, 4.3))
    assert dominant(tail, median) == "queue"


def test_breakdown_counts_start_arrivals_and_window_steps() -> None:
    # 10 ms steps from t=0. Requests 0-2 arrive at 0 (the start); request 0 finishes first,
    # at 0.2 s; requests 3.. arrive after it. Request 2 waits until 0.1 s to be scheduled:
    # of 200 requests, the two at or above p99 are 2 (at the start) and 199 (after it).
    starts = [i * 0.01 for i in range(100)]
    ends = [s + 0.009 for s in starts]
    recs = [RequestRecord(0, arrival_s=0.0, prompt_tokens=4, output_tokens=11,
                          first_token_s=0.005, finish_s=0.2, scheduled_s=0.0),
            RequestRecord(1, arrival_s=0.0, prompt_tokens=4, output_tokens=11,
                          first_token_s=0.005, finish_s=0.3, scheduled_s=0.0),
            RequestRecord(2, arrival_s=0.0, prompt_tokens=4, output_tokens=11,
                          first_token_s=0.5, finish_s=0.6, scheduled_s=0.1)]
    recs += [RequestRecord(i, arrival_s=0.2 + i * 1e-3, prompt_tokens=4, output_tokens=11,
                           first_token_s=0.21 + i * 1.00001e-3, finish_s=0.4 + i * 1e-3,
                           scheduled_s=0.2 + i * 1e-3) for i in range(3, 200)]
    # warm-up requests ran (and finished) before the measured phase: not its start
    recs += [RequestRecord(100 + i, arrival_s=-0.2, prompt_tokens=4, output_tokens=11,
                           first_token_s=-0.15, finish_s=-0.1, scheduled_s=-0.2, warmup=True)
             for i in range(2)]
    sec = tail_section(recs, starts, ends, [0] * 100, ProbeData(), 0.0)
    tail = sec.group("ttft", "tail")
    assert tail is not None and tail.num_requests == 2 and tail.at_start == 1
    # request 2: scheduled at 0.1 s, first token at 0.5 s: steps 10..49; request 199: one
    assert tail.steps == (40 + 1) / 2
    assert tail.prompt_tokens == 4  # each prompt's 4 tokens, none cached
    tpot = sec.group("tpot", "tail")
    assert tpot is not None and tpot.steps > 0


def test_a_gc_pause_inside_the_own_prefill_names_gc_not_the_prefill() -> None:
    # Measured under GC pressure: the tail requests' own prefill step held a gen-2 pause;
    # own prefill (the phase) explains 97% of the extra time, GC (the root) 90%.
    tail = _group("ttft", "tail", 262, own_prefill=(1, 254), gc=(5, 230), queue=(1, 8))
    median = _group("ttft", "median", 12.5, n=40, own_prefill=(1, 12.1), gc=(0.1, 1.0),
                    queue=(1, 0.4))
    assert dominant(tail, median) == "gc"


def test_long_prompts_make_the_own_prefill_the_cause() -> None:
    # The tail's prompts are 4x the median's and their prefill 4x as long: the work.
    tail = _group("ttft", "tail", 30, prompt=400, own_prefill=(1, 28), queue=(1, 1))
    median = _group("ttft", "median", 8, n=40, prompt=100, own_prefill=(1, 7), queue=(1, 1))
    assert dominant(tail, median) == "own_prefill"
    assert _finding(tail, median).id == "p99_ttft_own_prefill"


def test_a_stretched_own_prefill_is_not_the_cause() -> None:
    # Measured under GC pressure (docs/examples/gcpressure.py): the tail's own prefill took
    # 46.5 ms for 101 prompt tokens against 7.3 ms for 88; GC pauses explain 47% of the
    # extra time, another thread holding the GIL the rest (not measured).
    tail = _group("ttft", "tail", 66.0, prompt=101, own_prefill=(0.3, 46.5), queue=(1, 19.4),
                  gc=(22.7, 28.5), run_queue=(0, 4.8))
    median = _group("ttft", "median", 7.5, n=40, prompt=88, own_prefill=(0, 7.3),
                    queue=(1, 0.2), gc=(4.4, 0.9), run_queue=(0, 1.6))
    assert dominant(tail, median) is None
    f = _finding(tail, median)
    assert f.id == "p99_ttft_mixed"
    assert "took 46.50 ms for 101 prompt tokens against 7.30 ms for 88 (5.5x per token)" \
        in f.message
    assert "account for 3% of its extra time: its steps were stretched" in f.message
    assert "gc 47%" in f.message and "the rest (47%) was not measured (another thread " \
        "holding the GIL or a lock: run with --contention" in f.message
    assert f.evidence["tail_prompt_tokens"] == 101
    assert f.evidence["not_measured_share"] == 0.474


def test_gil_waits_measured_shrink_what_was_not_measured() -> None:
    # The same tail with the engine thread's GIL waits traced (--contention): 15 ms of the
    # tail's window against 0.5 ms in the median requests' explains 25% of the extra time.
    tail = _group("ttft", "tail", 66.0, prompt=101, own_prefill=(0.3, 46.5), queue=(1, 19.4),
                  gc=(22.7, 28.5), run_queue=(0, 4.8), gil=(12, 15.5), lock=(0, 0))
    median = _group("ttft", "median", 7.5, n=40, prompt=88, own_prefill=(0, 7.3),
                    queue=(1, 0.2), gc=(4.4, 0.9), run_queue=(0, 1.6), gil=(1, 0.5),
                    lock=(0, 0))
    f = _finding(tail, median)
    assert f.id == "p99_ttft_mixed"
    assert "gil 26%" in f.message and "the rest (22%) was not measured (a slower core" \
        in f.message
    assert f.evidence["not_measured_share"] == 0.217


def test_a_tail_mostly_waiting_for_the_gil_is_named() -> None:
    tail = _group("tpot", "tail", 20.0, steps=10, gil=(30, 13.0), lock=(0, 0))
    median = _group("tpot", "median", 5.0, n=40, steps=10, gil=(5, 1.0), lock=(0, 0))
    assert dominant(tail, median) == "gil"
    f = _finding(tail, median)
    assert f.id == "p99_tpot_gil"
    assert "30.0 waits for the GIL" in f.message and "explains 80%" in f.message


def test_without_prompt_counts_the_own_prefill_is_judged_as_before() -> None:
    # A result from before prompt counts were recorded: nothing says the steps stretched.
    tail = _group("ttft", "tail", 66.0, own_prefill=(0.3, 46.5), queue=(1, 19.4))
    median = _group("ttft", "median", 7.5, n=40, own_prefill=(0, 7.3), queue=(1, 0.2))
    assert dominant(tail, median) == "own_prefill"


def test_a_share_that_rounds_to_zero_reads_0_percent() -> None:
    from perfkit.summary.tail_rules import _share

    assert (_share(-0.001), _share(0.0), _share(0.28), _share(-0.2)) == ("0%", "0%", "28%",
                                                                          "-20%")
