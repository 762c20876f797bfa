import re

import pytest

from perfkit.stacks.folded import (
    COMPONENTS,
    LINE_RE,
    Frame,
    component_of_stack,
    format_folded,
    function_key,
    has_perfkit_frames,
    parse_folded,
    parse_frame,
    read_folded,
    summarize,
    write_folded,
)

# flamegraph.pl's line rule, as the issue states it
FLAMEGRAPH_LINE = re.compile(r"^(.*)\s+(\d+)$")

MODEL = "SyntheticModel.forward (perfkit/engine/layers/model.py:40)"
LINEAR = "linear (torch/nn/functional.py:10)"
ATTN = "PagedAttention.forward (perfkit/engine/layers/attention.py:88)"
STEP = "Engine.step (perfkit/engine/engine.py:130)"


def test_parse_merges_repeats_and_skips_blank_empty_and_zero():
    text = "a;b 3\n\na;b 2\n 7\nc 0\nx (f.py:1);y (f.py:2) 1\n"
    assert parse_folded(text) == {"a;b": 5, "x (f.py:1);y (f.py:2)": 1}


@pytest.mark.parametrize("line", ["a;b", "a;b 1.5", "a;b -1", "a;b x"])
def test_parse_rejects_lines_that_break_the_rule(line):
    with pytest.raises(ValueError, match="folded line 1"):
        parse_folded(line + "\n")


def test_format_is_sorted_and_every_line_matches_flamegraph_rule():
    text = format_folded({"z;y 1": 2, "a (m.py:1);b (m.py:2)": 7})
    lines = text.splitlines()
    assert lines == ["a (m.py:1);b (m.py:2) 7", "z;y 1 2"]
    for line in lines:
        match = FLAMEGRAPH_LINE.match(line)
        assert match and int(match.group(2)) > 0
    assert parse_folded(text) == {"z;y 1": 2, "a (m.py:1);b (m.py:2)": 7}
    assert LINE_RE.pattern == FLAMEGRAPH_LINE.pattern


@pytest.mark.parametrize("count", [0, -2, 1.5])
def test_format_refuses_non_positive_or_non_int_counts(count):
    with pytest.raises(ValueError, match="positive int"):
        format_folded({"a": count})


def test_write_read_roundtrip(tmp_path):
    stacks = {f"{MODEL};{LINEAR}": 4, STEP: 1}
    write_folded(tmp_path / "x.folded", stacks)
    assert read_folded(tmp_path / "x.folded") == stacks


def test_parse_frame_and_function_key():
    assert parse_frame(MODEL) == Frame("SyntheticModel.forward",
                                       "perfkit/engine/layers/model.py", 40)
    assert parse_frame("<module> (<string>:3)") == Frame("<module>", "<string>", 3)
    assert parse_frame("thread (0x1)") == Frame("thread (0x1)", "", 0)
    assert function_key(MODEL) == "SyntheticModel.forward (perfkit/engine/layers/model.py)"


@pytest.mark.parametrize(("leaf_file", "component"), [
    ("perfkit/engine/scheduler.py", "scheduler"),
    ("perfkit/engine/kv_manager.py", "scheduler"),
    ("perfkit/engine/sequence.py", "scheduler"),
    ("perfkit/engine/blocks.py", "block pool"),
    ("/venv/lib/python3.11/site-packages/perfkit/engine/blocks.py", "block pool"),
    ("perfkit/engine/layers/attention.py", "attention"),
    ("perfkit/engine/layers/workspace.py", "attention"),
    ("perfkit/engine/layers/kv_cache.py", "attention"),
    ("perfkit/engine/layers/model.py", "model"),
    ("perfkit/engine/layers/model_executor.py", "model"),
    ("perfkit/engine/layers/sampler.py", "sampling"),
    ("perfkit/engine/guard/mask.py", "guard"),
    ("perfkit/measure/nvml.py", "samplers"),
    ("perfkit/engine/engine.py", "other"),
    ("perfkit/sweep/runner.py", "other"),
])
def test_innermost_perfkit_frame_decides_the_component(leaf_file, component):
    stack = f"<module> (app.py:1);{STEP};f ({leaf_file}:5);{LINEAR}"
    assert component_of_stack(stack) == component


def test_torch_under_model_is_model_and_foreign_stacks_are_other():
    assert component_of_stack(f"{STEP};{MODEL};{LINEAR}") == "model"
    assert component_of_stack(f"{STEP};{MODEL};{ATTN};{LINEAR}") == "attention"
    assert component_of_stack("main (app.py:1);work (app.py:4)") == "other"
    assert not has_perfkit_frames({"main (app.py:1)": 3})
    assert has_perfkit_frames({f"{STEP};{MODEL}": 1})


def test_summary_self_inclusive_and_components():
    rec = "rec (r.py:1)"
    stacks = {f"{STEP};{MODEL};{LINEAR}": 6, f"{STEP};{ATTN}": 3, f"{rec};{rec}": 1}
    s = summarize(stacks, top=3)
    assert s.total == 10
    assert [(r.frame, r.samples) for r in s.top_self] == [
        ("linear (torch/nn/functional.py)", 6),
        ("PagedAttention.forward (perfkit/engine/layers/attention.py)", 3),
        ("rec (r.py)", 1),
    ]
    assert s.top_self[0].share == pytest.approx(0.6)
    incl = {r.frame: r.samples for r in summarize(stacks, top=10).top_inclusive}
    assert incl["Engine.step (perfkit/engine/engine.py)"] == 9
    assert incl["rec (r.py)"] == 1  # recursion counted once per sample
    comps = {r.frame: r.samples for r in s.components}
    assert [r.frame for r in s.components] == list(COMPONENTS)
    assert comps == {"scheduler": 0, "block pool": 0, "attention": 3, "sampling": 0,
                     "model": 6, "guard": 0, "samplers": 0, "other": 1}
    assert sum(r.share for r in s.components) == pytest.approx(1.0)


def test_summary_of_nothing():
    s = summarize({})
    assert s.total == 0 and s.top_self == [] and all(r.share == 0 for r in s.components)


def render(renderable) -> str:
    from rich.console import Console

    console = Console(width=120, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_terminal_summary_shows_components_self_and_inclusive():
    from perfkit.stacks.record import StackRecording
    from perfkit.stacks.summary import summary_renderable

    stacks = {f"{STEP};{MODEL};{LINEAR}": 6, f"{STEP};{ATTN}": 3, "idle (x.py:1)": 1}
    rec = StackRecording("py-spy", "", None, None, None, 10, 2.0, 100.0, False, "", stacks)
    text = render(summary_renderable(rec, top=3))
    assert "stacks: 10 samples in 2.0 s at 100 Hz (py-spy)" in text
    assert "time by perfkit component" in text
    assert re.search(r"60\.0%\s+6\s+\S+\s+model", text)
    assert re.search(r"60\.0%\s+6\s+linear \(torch/nn/functional\.py\)", text)
    assert re.search(r"90\.0%\s+9\s+Engine\.step \(perfkit/engine/engine\.py\)", text)
    empty = StackRecording("thread", "x", None, None, None, 0, 1.0, 100.0, False)
    assert "no samples" in render(summary_renderable(empty))


def test_kernel_table_and_cpu_reason():
    from perfkit.stacks.summary import kernels_renderable
    from perfkit.stacks.torch_kernels import KernelProfile, KernelRow

    prof = KernelProfile(True, rows=[KernelRow("ampere_sgemm_128x64", 1500.0, 12, 0.75)])
    text = render(kernels_renderable(prof))
    assert re.search(r"75\.0%\s+1\.50\s+12\s+ampere_sgemm_128x64", text)
    assert "no CUDA" in render(kernels_renderable(KernelProfile(False, "no CUDA device")))
    assert prof.to_dict()["rows"][0]["calls"] == 12
