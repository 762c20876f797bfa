"""Paged decode attention on CPU, compiled with numba: K/V read in place through the block table.

The gather backend copies every sequence's K and V blocks into a workspace (memcpy speed)
and runs SDPA on a transposed view of it; this kernel reads each cache row where it lies.
Per sequence, block by block (one block's K, then its V: contiguous, all kv heads at once):

    k/v cache  [num_blocks, block_size, KVH, D]    one token's K for one kv head: D floats
    q          [S, H, D]       one query token per sequence; head h reads kv head h // G
    table      [S, max_blocks] int64, row s padded with any valid id past seq_lens[s]
    seq_lens   [S]             >= 1; sequence s attends to positions < seq_lens[s]
    out        [S, H, D]       also the running accumulator (unnormalised until the end)

    for each block b of sequence s (n = its valid tokens):
        scores[h, t] = q[s, h] . K[table[s, b], t, h // G] * scale      [H, n]
        online softmax per head: m (running max), l (running sum); out[s, h] *= exp(m_old - m)
        out[s, h] += sum_t exp(scores[h, t] - m[h]) * V[table[s, b], t, h // G]
    out[s, h] /= l[h]

The inner loops run over D (contiguous) with four tokens per pass, so one load of a query
(or accumulator) row feeds four FMAs and LLVM vectorizes them (fastmath), and exp is a
polynomial LLVM vectorizes too (libm's expf was ~7% of the time). `perfkit bench` decode
(16 seqs x 512 context, 32/8 heads, D 128, one thread): 0.88-0.89x dense SDPA (gather +
SDPA: 1.78-2.01x); one dot per token and head, libm exp, was 1.3-1.4x. With two threads the
sequences split among numba's threads (prange) measured 0.61-0.69x dense against 0.71-1.07x
serial, and cpu-mid decode steps at 8 sequences 0.94-0.95x the serial kernel's.

Imported normally, the functions are compiled (numba.njit, cache=True: the machine code is
written beside this file once and loaded after); `pure()` loads this source again with the
decorator a no-op, the plain-Python reference the tests run (PERFKIT_NO_JIT=1, or numba
missing). fp32 only: other dtypes keep the gather backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

from perfkit.jit import kernel_with

F = TypeVar("F", bound=Callable[..., Any])
UNROLL = 4  # tokens per pass of the inner loops
# fastmath without nnan/ninf: the running max starts at -inf and must stay one
FASTMATH = {"contract", "reassoc", "nsz", "arcp", "afn"}

try:
    from numba import prange
except ImportError:  # plain Python then
    prange = range  # type: ignore[misc]


def _kernel(parallel: bool = False, entry: bool = False) -> Callable[[F], F]:
    """perfkit.jit's kernel with fastmath (and prange when `parallel`). Helpers are inlined
    into the entry points (a call between compiled functions costs a reference count on
    every array it passes)."""
    return kernel_with(entry=entry, fastmath=FASTMATH, parallel=parallel)


@_kernel()
def _dot4(q, k0, k1, k2, k3):
    """q . k0 .. q . k3 over D (all rows [D])."""
    a0 = a1 = a2 = a3 = np.float32(0.0)
    for j in range(q.shape[0]):
        x = q[j]
        a0 += x * k0[j]
        a1 += x * k1[j]
        a2 += x * k2[j]
        a3 += x * k3[j]
    return a0, a1, a2, a3


@_kernel()
def _dot1(q, k0):
    a0 = np.float32(0.0)
    for j in range(q.shape[0]):
        a0 += q[j] * k0[j]
    return a0


@_kernel()
def _axpy4(acc, p0, p1, p2, p3, v0, v1, v2, v3):
    """acc [D] += p0 * v0 + .. + p3 * v3."""
    for j in range(acc.shape[0]):
        acc[j] += p0 * v0[j] + p1 * v1[j] + p2 * v2[j] + p3 * v3[j]


@_kernel()
def _axpy1(acc, p0, v0):
    for j in range(acc.shape[0]):
        acc[j] += p0 * v0[j]


@_kernel()
def _block_scores(qs, kb, n, group, scale, sc):
    """sc[h, :n] = qs[h] . kb[:n, h // group] * scale. qs [H, D], kb [block_size, KVH, D]."""
    for h in range(qs.shape[0]):
        kh = h // group
        qrow = qs[h]
        t = 0
        while t + UNROLL <= n:
            a0, a1, a2, a3 = _dot4(qrow, kb[t, kh], kb[t + 1, kh], kb[t + 2, kh],
                                   kb[t + 3, kh])
            sc[h, t] = a0 * scale
            sc[h, t + 1] = a1 * scale
            sc[h, t + 2] = a2 * scale
            sc[h, t + 3] = a3 * scale
            t += UNROLL
        while t < n:
            sc[h, t] = _dot1(qrow, kb[t, kh]) * scale
            t += 1


@_kernel()
def _exp_shifted(row, n, shift, bits):
    """row[:n] = exp(row[:n] - shift) for row <= shift; returns their sum. Vectorizable (no
    libm call): exp(x) = 2^z * e^r, z = round(x / ln 2), |r| <= ln(2) / 2, e^r by Cephes'
    expf polynomial (relative error ~1.2e-7), 2^z built in the exponent bits of `bits`
    (int32 [>= n] scratch). x is clamped at -87 (e^-87 ~ 1.6e-38, the smallest normal; the
    sum it joins is >= 1, as the max's term is 1)."""
    scale = bits.view(np.float32)
    for t in range(n):
        x = max(row[t] - shift, np.float32(-87.0))
        z = np.floor(x * np.float32(1.44269504) + np.float32(0.5))
        r = x - z * np.float32(0.693359375) + z * np.float32(2.12194440e-4)  # ln 2 in two
        p = ((((np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)) * r
               + np.float32(8.3334519073e-3)) * r + np.float32(4.1665795894e-2)) * r
             + np.float32(1.6666665459e-1)) * r + np.float32(5.0000001201e-1)
        row[t] = p * r * r + r + np.float32(1.0)
        bits[t] = (np.int32(z) + np.int32(127)) << np.int32(23)
    total = np.float32(0.0)
    for t in range(n):
        row[t] *= scale[t]
        total += row[t]
    return total


@_kernel()
def _block_softmax(sc, n, m, lsum, acc, bits):
    """Online softmax step: scores sc[h, :n] -> exp(sc - m_new) in place; m, lsum [H] and
    the accumulator acc [H, D] rescaled to the new running max. bits: int32 scratch [n]."""
    for h in range(sc.shape[0]):
        m_new = m[h]
        for t in range(n):
            m_new = max(m_new, sc[h, t])
        alpha = math.exp(m[h] - m_new)  # 0 at the first block (m = -inf)
        m[h] = m_new
        lsum[h] = lsum[h] * alpha + _exp_shifted(sc[h], n, m_new, bits)
        if alpha != 1.0:
            row = acc[h]
            for j in range(row.shape[0]):
                row[j] *= alpha


@_kernel()
def _block_values(acc, vb, n, group, sc):
    """acc[h] += sum_t sc[h, t] * vb[t, h // group] over t < n. vb [block_size, KVH, D]."""
    for h in range(acc.shape[0]):
        kh = h // group
        row = acc[h]
        t = 0
        while t + UNROLL <= n:
            _axpy4(row, sc[h, t], sc[h, t + 1], sc[h, t + 2], sc[h, t + 3],
                   vb[t, kh], vb[t + 1, kh], vb[t + 2, kh], vb[t + 3, kh])
            t += UNROLL
        while t < n:
            _axpy1(row, sc[h, t], vb[t, kh])
            t += 1


@_kernel()
def _sequence(qs, k, v, blocks, seq_len, scale, acc):
    """One sequence: qs, acc [H, D]; blocks [max_blocks] its table row."""
    num_heads, head_dim = qs.shape
    block_size = k.shape[1]
    group = num_heads // k.shape[2]
    sc = np.empty((num_heads, block_size), np.float32)  # one block's scores, then probs
    m = np.full(num_heads, -np.inf, np.float32)
    lsum = np.zeros(num_heads, np.float32)
    bits = np.zeros(block_size, np.int32)  # exp's 2^z, see _exp_shifted
    for h in range(num_heads):
        for j in range(head_dim):
            acc[h, j] = 0.0
    for b in range((seq_len + block_size - 1) // block_size):
        n = min(block_size, seq_len - b * block_size)
        _block_scores(qs, k[blocks[b]], n, group, scale, sc)
        _block_softmax(sc, n, m, lsum, acc, bits)
        _block_values(acc, v[blocks[b]], n, group, sc)
    for h in range(num_heads):
        inv = 1.0 / lsum[h]
        for j in range(head_dim):
            acc[h, j] *= inv


@_kernel(entry=True)
def decode_serial(q, k, v, table, seq_lens, scale, out):
    """out [S, H, D] = attention of q [S, H, D] over the paged k/v (module docstring)."""
    for s in range(q.shape[0]):
        _sequence(q[s], k, v, table[s], seq_lens[s], scale, out[s])


@_kernel(parallel=True, entry=True)
def decode_parallel(q, k, v, table, seq_lens, scale, out):
    """decode_serial with the sequences shared among numba's threads."""
    for s in prange(q.shape[0]):
        _sequence(q[s], k, v, table[s], seq_lens[s], scale, out[s])


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor,
        seq_lens: torch.Tensor, scale: float, out: torch.Tensor) -> None:
    """Writes out [S, H, D]. CPU fp32 tensors, q/out/table contiguous, k/v_cache one layer
    [num_blocks, block_size, KVH, D]; table int64 [S, max_blocks]; seq_lens [S]. Read and
    written through numpy views of the same memory (no copies). Parallel over sequences
    when torch runs more than one intra-op thread, with as many (at most numba's)."""
    threads = torch.get_num_threads()
    kernel = decode_parallel if threads > 1 and q.shape[0] > 1 else decode_serial
    if kernel is decode_parallel and _COMPILED:
        _set_numba_threads(threads)
    kernel(q.numpy(), k_cache.numpy(), v_cache.numpy(), table.numpy(), seq_lens.numpy(),
           np.float32(scale), out.numpy())


_COMPILED = hasattr(decode_parallel, "py_func")  # a numba Dispatcher, not this module's source


def _set_numba_threads(threads: int) -> None:
    import numba

    wanted = min(threads, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)
