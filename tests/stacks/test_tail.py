import re
import xml.etree.ElementTree as ET

from perfkit.stacks.diffsvg import diff_color, render_diff_svg
from perfkit.stacks.probe import TailProbe
from perfkit.stacks.tail import cut_stacks, growing_frames, step_of_samples, write_tail_stacks
from perfkit.stacks.timed_sampler import GC_FRAME, TimedSampler

FLAMEGRAPH_LINE = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")


def test_samples_fall_in_the_step_that_holds_them() -> None:
    assert step_of_samples([0.5, 1.5, 2.2, 9.0], [0.0, 2.0], [1.0, 3.0]) == [0, -1, 1, -1]


def test_cut_and_growth() -> None:
    stacks = ["main (a.py:1);work (a.py:2)", "main (a.py:1);gc.collect[gen2] (<gc>:0)"]
    tail = cut_stacks([0, 1, 1], [1, 1, 1], stacks, {1})
    median = cut_stacks([0, 0], [0, 0], stacks, {0})
    assert tail == {stacks[0]: 1, stacks[1]: 2} and median == {stacks[0]: 2}
    top = growing_frames(tail, median)
    assert top[0].frame == "gc.collect[gen2] (<gc>)" and round(top[0].growth, 3) == 0.667


def test_write_tail_stacks_files_read_by_flamegraph(tmp_path) -> None:
    sampler = TimedSampler(100.0)
    slow, fast = "main (a.py:1);slow (a.py:5)", "main (a.py:1);fast (a.py:9)"
    sampler.stack_ids = {fast: 0, slow: 1}
    starts = [float(i) for i in range(200)]
    ends = [s + (0.9 if i == 7 else 0.1) for i, s in enumerate(starts)]
    sampler.sample_s = [s + 0.05 for s in starts] + [7.5]
    sampler.sample_stack = [0] * 200 + [1]
    sampler.sample_stack[7] = 1
    info = write_tail_stacks(sampler, starts, ends, tmp_path, "level-1")
    assert info is not None and info.num_tail_steps == 1 and info.num_tail_samples == 2
    assert info.growing[0].frame == "slow (a.py)"
    for name in ("level-1.tail.folded", "level-1.median.folded"):
        lines = (tmp_path / name).read_text().splitlines()
        assert lines and all(FLAMEGRAPH_LINE.match(line) for line in lines)
    ET.fromstring((tmp_path / "level-1.tail-diff.svg").read_text())  # renders, well-formed


def test_diff_colours_and_empty_median() -> None:
    assert diff_color(0.3) == "rgb(255,55,55)" and diff_color(-0.3) == "rgb(55,55,255)"
    svg = render_diff_svg({"a (x.py:1) ": 0} | {"a (x.py:1)": 3}, {}, "t")
    assert "tail 100.0%, median 0.0%" in svg


def test_gc_pause_becomes_samples_with_the_collector_frame() -> None:
    sampler = TimedSampler(1000.0)
    sampler._on_gc("start", {"generation": 2})
    sampler._gc_start = (sampler._gc_start or 0.0) - 0.0035  # a 3.5 ms pause
    sampler._on_gc("stop", {"generation": 2})
    assert len(sampler.sample_s) == 3
    (stack,) = sampler.counts
    assert stack.endswith(GC_FRAME.format(gen=2))


def test_probe_records_gc_pauses() -> None:
    import gc

    probe = TailProbe(200.0)
    probe.start()
    gc.collect()
    data = probe.stop()
    assert data.gc_start_s and data.gc_end_s[-1] >= data.gc_start_s[-1]
    assert data.counters_reason or len(data.tick_s) >= 2


def test_no_sample_in_a_tail_step_writes_no_tail_file(tmp_path) -> None:
    # flamegraph.pl refuses an empty folded file ("No stack counts found")
    from perfkit.stacks.summary import tail_lines
    sampler = TimedSampler(100.0)
    sampler.stack_ids = {"main (a.py:1);fast (a.py:9)": 0}
    starts = [float(i) for i in range(200)]
    ends = [s + (0.9 if i == 7 else 0.1) for i, s in enumerate(starts)]
    sampler.sample_s = [s + 0.05 for i, s in enumerate(starts) if i != 7]
    sampler.sample_stack = [0] * 199
    info = write_tail_stacks(sampler, starts, ends, tmp_path, "level-1")
    assert info is not None and info.num_tail_samples == 0 and info.tail_folded_path is None
    assert not (tmp_path / "level-1.tail.folded").exists()
    assert (tmp_path / "level-1.median.folded").read_text().strip()
    assert "raise --stack-rate" in str(tail_lines(info))
