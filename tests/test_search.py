"""sweep --search: bracketing then bisection on goodput decisions with Wilson intervals."""

from __future__ import annotations

import json

import pytest
from levels import level as typed_level

from perfkit.run.search import Search, decide, sentence, wilson


class FakeWriter:
    def __init__(self) -> None:
        self.levels: list = []

    def add_level(self, level) -> None:
        self.levels.append(level)


def runner(share_at):
    """A level of 100 measured requests whose good share is share_at(x)."""

    def run_one(point, repeat):
        good = round(100 * share_at(point.x))
        return typed_level({"concurrency": point.concurrency, "repeat": repeat,
                            "goodput": {"requests": 100, "good_requests": good}})

    return run_one


def search(share_at, axis="concurrency"):
    s = Search(runner(share_at), FakeWriter(), axis, 0.9, lambda: False)  # type: ignore[arg-type]
    best, fail = s.bracket(1.0, 4096.0)
    if best is not None and fail is not None:
        best, fail = s.bisect(best, fail)
    return best, fail, s


def test_wilson_is_sound_at_the_edges():
    low, high = wilson(100, 100)
    assert high == 1.0 and 0.95 < low < 0.97
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(50, 100)
    assert low < 0.5 < high


def test_brackets_then_bisects_to_one_client():
    best, fail, s = search(lambda x: 1.0 if x <= 11 else 0.5)
    assert (best, fail) == (11, 12)
    assert [st.x for st in s.steps] == [1, 2, 4, 8, 16, 12, 10, 11]


def test_an_uncertain_level_runs_again_then_counts_as_failing():
    best, fail, s = search(lambda x: 1.0 if x < 4 else 0.9 if x == 4 else 0.2)
    step4 = next(st for st in s.steps if st.x == 4)
    assert step4.decision == "uncertain" and step4.runs == 3 and step4.requests == 300
    assert (best, fail) == (3, 4)


def test_nothing_meets_and_the_cap():
    best, fail, _ = search(lambda x: 0.1)
    assert (best, fail) == (None, 1.0)
    best, fail, _ = search(lambda x: 1.0)
    assert best == 4096 and fail is None


def test_rate_bisects_to_ten_percent():
    best, fail, _ = search(lambda x: 1.0 if x <= 37.0 else 0.0, axis="rate")
    assert best <= 37.0 < fail and fail / best < 1.1


def test_the_sentence_says_what_and_how_sure():
    steps = [decide([typed_level({"goodput": {"requests": 100, "good_requests": 97}})], 4, 0.9),
             decide([typed_level({"goodput": {"requests": 100, "good_requests": 60}})], 8, 0.9)]
    text = sentence("concurrency", 4, 8, steps, 0.9, "TTFT <= 12 ms")
    assert text.startswith("Highest concurrency meeting the SLOs (90% of requests within "
                           "TTFT <= 12 ms): 4 (97% good [")
    assert "8 (60% good [" in text and "fails" in text


@pytest.mark.parametrize(("slo", "found"), [("slo.ttft_s=100.0", True), ("slo.ttft_s=1e-6", False)])
def test_search_end_to_end(cli, tmp_path, slo, found):
    out = tmp_path / "s.json"
    result = cli("sweep", "--search", "--search-max", "2", "--concurrency", "1", "--requests",
                 "40", "--warmup", "1", "--set", slo, "--set", "sweep.min_requests_per_client=0",
                 "--set", "engine.cpu_threads=1", "--json", str(out), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    search_ = doc["search"]
    assert (search_["best"] is not None) == found
    last_runs = {s["x"]: s["runs"] for s in search_["steps"]}  # runs pooled per load
    assert len(doc["levels"]) == sum(last_runs.values())
    assert ("Highest concurrency" if found else "No concurrency") in search_["sentence"]


def test_an_answer_that_does_not_hold_in_a_later_run_is_searched_below():
    calls = {"n": 0}

    def drifting(x):  # 12 meets the first time only: the machine slowed down
        if x == 12:
            calls["n"] += 1
            return 1.0 if calls["n"] == 1 else 0.0
        return 1.0 if x < 12 else 0.2

    best, fail, s = search(drifting)
    assert (best, fail) == (12, 13)
    best, fail = s.confirm(best, fail)
    assert (best, fail) == (11, 12)
    assert s.last[12].runs == 2 and s.last[12].decision == "fails"  # pooled 100 + 0 of 200
    assert s.last[11].decision == "meets"


def test_bounds_from_the_decisions_so_far_for_an_interrupted_search():
    _, _, s = search(lambda x: 1.0 if x <= 11 else 0.5)
    assert s.bounds() == (11, 12)
    empty = Search(runner(lambda x: 1.0), FakeWriter(), "concurrency", 0.9,  # type: ignore[arg-type]
                   lambda: False)
    assert empty.bounds() == (None, None)
