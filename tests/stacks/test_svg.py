import xml.etree.ElementTree as ET

import pytest

from perfkit.stacks.svg import (
    COMPONENT_COLORS,
    PAD_PX,
    WIDTH_PX,
    build_tree,
    render_svg,
    write_svg,
)

NS = {"svg": "http://www.w3.org/2000/svg"}
MODEL = "SyntheticModel.forward (perfkit/engine/layers/model.py:40)"
STACKS = {
    f"<module> (app.py:1);{MODEL};linear (torch/nn/functional.py:10)": 6,
    f"<module> (app.py:1);{MODEL}": 2,
    "<module> (app.py:1);work (app.py:5)": 2,
}


def frames(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return root.findall(".//svg:g[@class='frame']", NS)


def test_parses_as_xml_with_one_rect_per_frame():
    groups = frames(render_svg(STACKS, "level-1"))
    # all, <module>, forward, linear, work
    assert len(groups) == 5
    assert all(len(g.findall("svg:rect", NS)) == 1 for g in groups)


def test_widths_are_proportional_and_tooltips_carry_share():
    by_title = {}
    for g in frames(render_svg(STACKS, "t")):
        title = g.find("svg:title", NS).text
        by_title[title.split(" - ")[0]] = (g.find("svg:rect", NS), title)
    inner = WIDTH_PX - 2 * PAD_PX
    rect, title = by_title[MODEL]
    assert float(rect.get("width")) == pytest.approx(inner * 8 / 10, abs=0.01)
    assert "8 samples (80.00%)" in title
    assert float(by_title["all"][0].get("x")) == pytest.approx(PAD_PX)
    assert by_title[MODEL][0].get("fill") == COMPONENT_COLORS["model"]


def test_callees_sit_above_callers():
    ys = {}
    for g in frames(render_svg(STACKS, "t")):
        ys[g.find("svg:title", NS).text.split(" - ")[0]] = float(g.find("svg:rect", NS).get("y"))
    linear = ys["linear (torch/nn/functional.py:10)"]
    assert ys["all"] > ys["<module> (app.py:1)"] > ys[MODEL] > linear


def test_labels_only_when_wide_enough_and_escaped():
    stacks = {"<module> (app.py:1)": 1000, "tiny (app.py:2)": 1}
    groups = frames(render_svg(stacks, "t"))
    labels = [g.find("svg:text", NS) for g in groups]
    texts = [t.text for t in labels if t is not None]
    assert "<module> (app.py:1)" in texts
    assert not any(t.startswith("tiny") for t in texts)


def test_no_scripts_and_empty_input(tmp_path):
    svg = render_svg({}, "empty")
    assert "<script" not in svg and "http://www.w3.org/2000/svg" in svg
    assert frames(svg) == []  # nothing sampled: no frame rectangles
    write_svg(tmp_path / "a.svg", STACKS, "a")
    assert frames((tmp_path / "a.svg").read_text())


def test_build_tree_counts():
    root = build_tree(STACKS)
    assert root.count == 10
    module = root.children["<module> (app.py:1)"]
    assert module.count == 10 and module.children[MODEL].count == 8
