"""The replays' shortcuts equal the plain passes they replace: the paged step's one-pass
commit (RUN compacted, the decode-only bound cached), compiled arrays without an owner,
and the trace drawn in a child while the kernels load."""

from __future__ import annotations

import numpy as np
import pytest

from perfkit import jit
from perfkit.config.profile import Overrides, load_profile
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.policies import FragConfig, trace_and_kernels
from perfkit.fragmentation.trace import lengths_trace
from perfkit.fragmentation.types import PolicyResult
from perfkit.replay import paged_kernel, paged_span, paged_step
from perfkit.replay import paged_layout as pk

# (profile, blocks, block size, max_num_seqs, token budget, prefix caching): batch cap,
# preemptions, chunked prefill, a budget below the batch, prefixes
CASES = [("sharegpt", 4000, 16, 32, 1 << 40, False), ("sharegpt", 300, 16, 16, 512, False),
         ("default", 60, 8, 8, 64, False), ("default", 2000, 4, 12, 6, False),
         ("shared-prefix", 200, 16, 16, 256, True)]


def _replay(name: str, blocks: int, bs: int, seqs: int, budget: int, caching: bool
            ) -> PolicyResult:
    tr = lengths_trace(load_profile(name, Overrides(sets=("workload.seed=3",))), 150)
    return simulate_paged(tr, blocks, bs, seqs, caching, max_num_batched_tokens=budget,
                          use_jit=False)


@pytest.mark.parametrize("case", CASES)
def test_cached_decode_bound_equals_a_fresh_pass(case, monkeypatch):
    jit.pure(paged_kernel)  # and its callees' pure copies
    plain = jit.pure(paged_span)
    fresh_pass = plain.decode_fin
    used = []

    def checked(req, q, s):
        cached = s[pk.FIN_HINT]
        s[pk.FIN_HINT] = -1
        fresh = fresh_pass(req, q, s)
        if cached >= 0:
            assert cached == fresh
            used.append(cached)
        return fresh

    monkeypatch.setattr(plain, "decode_fin", checked)
    _replay(*case)
    assert used  # commit's and fast_forward's values were there to check


@pytest.mark.parametrize("case", CASES)
def test_covered_commit_compacts_as_compact(case, monkeypatch):
    jit.pure(paged_kernel)
    plain = jit.pure(paged_step)
    commit = plain.commit
    covered = []

    def checked(req, q, grp, cfg, s, lg):
        before = [q[k * pk.NQ + pk.RUN] for k in range(s[pk.NRUN])]
        was_covered = s[pk.COVERED] == 1
        ran = commit(req, q, grp, cfg, s, lg)
        if was_covered:
            expect = [i for i in before if req[i * pk.NF + pk.STAT] == pk.RUNNING]
            assert [q[k * pk.NQ + pk.RUN] for k in range(s[pk.NRUN])] == expect
            assert s[pk.REMOVED] == 0
        covered.append(was_covered)
        return ran

    monkeypatch.setattr(plain, "commit", checked)
    _replay(*case)
    assert any(covered)


@pytest.mark.parametrize("case", CASES)
def test_uncovered_steps_take_the_plain_passes(case, monkeypatch):
    """Only RUN's newest request has more than a token to compute, so a step's budget
    never runs out before the last running request (COVERED stays 1); were it to, commit
    leaves RUN to `compact` and the bound to a fresh pass. Forced here every other step."""
    expect = _replay(*case)
    jit.pure(paged_kernel)
    plain = jit.pure(paged_step)
    schedule = plain.schedule_running
    steps = [0]

    def uncovered(req, q, grp, cfg, s, lg):
        schedule(req, q, grp, cfg, s, lg)
        steps[0] += 1
        if steps[0] % 2:
            s[pk.COVERED] = 0

    monkeypatch.setattr(plain, "schedule_running", uncovered)
    assert _replay(*case) == expect


def test_unowned_is_the_identity_in_plain_python():
    a = np.arange(3)
    assert jit.unowned("m" + jit.PURE_SUFFIX)(a) is a


@pytest.mark.skipif(bool(jit.numba_missing()) or jit.jit_disabled(), reason="needs numba")
def test_unowned_view_is_the_same_memory():
    import numba

    view = jit.unowned(__name__)

    @numba.njit
    def fill(a):
        v = view(a)
        for k in range(len(v)):
            v[k] = 2 * k
        return v.sum() + len(v)

    a = np.zeros(5, np.int64)
    assert fill(a) == 25
    assert a.tolist() == [0, 2, 4, 6, 8]


@pytest.mark.parametrize("procs", [1, 2])
def test_the_trace_drawn_beside_the_kernels_is_the_trace(procs):
    prof = load_profile("sharegpt")
    cfg = FragConfig(num_requests=300, arrivals="closed", clients=4)
    assert trace_and_kernels(prof, cfg, procs) == lengths_trace(prof, 300, "closed",
                                                                clients=4)
