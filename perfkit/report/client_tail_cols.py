"""The remote levels' tail table: the p99 requests against the median ones, as the client
saw them (result/client_tail.py). TTFT: first-token time (queue, prefill and interference
together: a client cannot split them). TPOT: stalls, gaps between chunks over 4x the
request's own median gap; `at token` lists where the slowest request stalled."""

from __future__ import annotations

from collections.abc import Callable

from perfkit.report.cells import NA, level_name, ms, num
from perfkit.result import LevelResult
from perfkit.result.client_tail import ClientTailGroup

Cell = Callable[[LevelResult], str]
MAX_POSITIONS = 4  # stall positions shown in the cell


def _group(metric: str, which: str, get: Callable[[ClientTailGroup], str]) -> Cell:
    def cell(lv: LevelResult) -> str:
        sec = lv.client_tail
        g = None if sec is None else sec.group(metric, which)
        return NA if g is None or not g.num_requests else get(g)
    return cell


def _positions(g: ClientTailGroup) -> str:
    worst = g.requests[0] if g.requests else None
    if worst is None or not worst.stalls:
        return "-" if worst is not None else NA
    shown = ",".join(str(s.index) for s in worst.stalls[:MAX_POSITIONS])
    return shown + ("…" if worst.num_stalls > MAX_POSITIONS else "")


CLIENT_TAIL: list[tuple[str, Cell]] = [
    ("level", level_name),
    ("p99 TTFT\nreqs", _group("ttft", "tail", lambda g: str(g.num_requests))),
    ("first\ntok ms", _group("ttft", "tail", lambda g: ms(g.ttft_s))),
    ("median\nms", _group("ttft", "median", lambda g: ms(g.ttft_s))),
    ("p99 TPOT\nstalls", _group("tpot", "tail", lambda g: num(g.num_stalls))),
    ("stall\nms", _group("tpot", "tail", lambda g: ms(g.stall_s))),
    ("median\nstalls", _group("tpot", "median", lambda g: num(g.num_stalls))),
    ("at\ntoken", _group("tpot", "tail", _positions)),
]
TITLE = "Remote tail, client view: p99 requests vs median (stall: gap > 4x its median)"
