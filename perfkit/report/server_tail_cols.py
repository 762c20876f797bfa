"""The remote levels' server-view tail table (--server-traces): the p99 TTFT and p99 TPOT
requests' client window split by the server's own spans (result/server_traces.py), means
per joined request in ms; TPOT parts per output token. `outside eng` is the server's API
process plus everything between the server and perfkit. Without --server-traces the
table is left out and the client-view table's title says why."""

from __future__ import annotations

from collections.abc import Callable

from perfkit.report.cells import NA, level_name, ms
from perfkit.result import LevelResult
from perfkit.result.server_traces import ServerSplit

Cell = Callable[[LevelResult], str]


def _joined(lv: LevelResult) -> str:
    st = lv.server_traces
    return NA if st is None or not st.requests else f"{st.joined}/{st.requests}"


def _split(metric: str, get: Callable[[ServerSplit], float | None]) -> Cell:
    def cell(lv: LevelResult) -> str:
        g = None if lv.client_tail is None else lv.client_tail.group(metric, "tail")
        return NA if g is None or g.server is None else ms(get(g.server))
    return cell


SERVER_TAIL: list[tuple[str, Cell]] = [
    ("level", level_name),
    ("joined", _joined),
    ("p99 TTFT\nms", _split("ttft", lambda s: s.window_s)),
    ("queue\nms", _split("ttft", lambda s: s.queue_s)),
    ("prefill\nms", _split("ttft", lambda s: s.prefill_s)),
    ("outside\neng ms", _split("ttft", lambda s: s.outside_engine_s)),
    ("p99 TPOT\nms", _split("tpot", lambda s: s.window_s)),
    ("decode\nms", _split("tpot", lambda s: s.decode_s)),
    ("outside\neng ms", _split("tpot", lambda s: s.outside_engine_s)),
]
TITLE = "Remote tail, server view (the server's spans): p99 requests, mean per request"


def unavailable_reason(levels: list[LevelResult]) -> str | None:
    """Why no remote level has server timings; None when one has."""
    sections = [lv.server_traces for lv in levels if lv.server_traces is not None]
    if not sections or any(st.available for st in sections):
        return None
    return sections[0].reason
