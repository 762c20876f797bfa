"""Weight matmuls of the synthetic model: `x @ w`, with the weight prepacked for oneDNN on CPU.

MKL's sgemm repacks its B operand (the weight) on every call. On one thread, once the
weights no longer fit in the core's cache (the mid shape's 4 layers are 52 MB, its L2 is
4 MB), that copy costs more than the product itself at decode batches: [8, 512] @
[512, 3072] with cold weights measured 1.05-1.14 ms plain, 0.46-0.64 ms prepacked. So each
large weight is packed once, when the model is built, in oneDNN's blocked layout for the
decode batch (`batch_hint`: max_num_seqs), and products of MIN_ROWS..batch_hint rows use
it. Measured in whole decode steps (cpu-mid shape, one thread): 8 sequences 10.7 -> 8.8
ms, 32: 16.3 -> 14.9 ms. Where it did not pay, it is off:
- more than one thread: MKL spreads the repack over the threads too, and packed steps
  were no faster (2 threads, 8 sequences: 4.5 plain, 4.7 packed);
- weights under PACK_MIN_BYTES: they stay in cache, the packed op's overhead dominates
  (the tiny preset's step of 4: 0.73 -> 1.00 ms; the small preset's 1.5 MB gate/up
  projection: steps of 2-32 sequences 10-18% slower);
- fewer than MIN_ROWS rows (one row: MKL's gemv reads the weight once, 260 us against
  310-450 packed) and prefill chunks beyond the hint (96 rows: no faster packed).

The packed kernel is a private torch op (torch.ops.mkldnn._linear_pointwise, what
torch.compile's CPU backend emits for a frozen Linear), so a pack is checked once against
the plain product and dropped, with the plain matmul kept, if the op is missing or wrong.
"""

from __future__ import annotations

from typing import Literal

import torch

Gemm = Literal["auto", "plain"]  # engine.cpu_gemm: auto prepacks where it can
PACK_MIN_BYTES = 2 << 20  # smaller weights stay plain (see the module's docstring)
MIN_ROWS = 4  # fewer rows stay plain
CHECK_ROWS = MIN_ROWS  # the pack's self-check: a packed product of this many rows vs plain


class Weight:
    """w: [in, out] (the product is x [M, in] @ w -> [M, out]). `packed` is oneDNN's copy
    (from w.T) or None; both hold the same values, so the model's parameter count is w's."""

    def __init__(self, w: torch.Tensor, packed: torch.Tensor | None = None,
                 max_rows: int = 0) -> None:
        self.w = w
        self.packed = packed
        self.max_rows = max_rows  # products of MIN_ROWS..max_rows rows use `packed`

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: [M, in] contiguous -> [M, out]."""
        if self.packed is None or not MIN_ROWS <= x.shape[0] <= self.max_rows:
            return x @ self.w
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")


def use_onednn(gemm: Gemm, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether to prepack: auto, on CPU, on one intra-op thread (as the engine set it up),
    in float32, with oneDNN built in."""
    return (gemm != "plain" and device.type == "cpu" and dtype == torch.float32
            and torch.get_num_threads() == 1 and torch.backends.mkldnn.is_available())


def make_weight(w: torch.Tensor, batch_hint: int, prepack: bool) -> Weight:
    """A Weight for w [in, out]; packed for up to `batch_hint` rows (at least CHECK_ROWS)
    when `prepack`, w is at least PACK_MIN_BYTES and the packed product matches the plain
    one on CHECK_ROWS rows."""
    if not prepack or w.numel() * w.element_size() < PACK_MIN_BYTES:
        return Weight(w)
    try:
        hint = max(batch_hint, CHECK_ROWS)
        packed = torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), hint)
        weight = Weight(w, packed, hint)
        x = torch.randn(CHECK_ROWS, w.shape[0], dtype=w.dtype, generator=_gen())
        if torch.allclose(weight(x), x @ w, rtol=1e-4, atol=1e-4):
            return weight
    except (RuntimeError, AttributeError):
        pass
    return Weight(w)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)  # the check never moves the model's seeds
