"""One serving model for every replay: the trace, the arrival rule, the scheduler.

trace.py holds the requests as lengths (`Trace`) and arrivals.py the one arrival rule
(`OpenLoop` steps or a `ClosedLoop` of clients), both of which every replay consumes. The
reference replay is the real Engine with the null executor (engine_replay.py); the fast
one is the paged kernel (paged_*.py, compiled by perfkit/jit.py), which mirrors
engine/scheduler.py step for step. tests/replay/test_conformance.py runs them all on the
same traces and compares their decisions step by step (decisions.py).
"""
