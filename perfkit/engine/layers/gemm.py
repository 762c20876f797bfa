"""Weight matmuls of the synthetic model: `x @ w`, with the weight prepacked for oneDNN on CPU.

MKL's sgemm repacks its B operand (the weight) on every call. Once the weights no longer
fit in the cache (the mid shape's 4 layers are 52 MB) that copy costs more than the product
itself at decode batches of 2..16 rows: [8, 512] @ [512, 3072] with cold weights measured
1.05-1.14 ms plain, 0.46-0.64 ms prepacked (one core). So on CPU each weight is packed
once, when the model is built, in oneDNN's blocked layout for the decode batch
(`batch_hint`: max_num_seqs), and products of 2..batch_hint rows use it. A single row stays
a plain matmul (MKL's gemv reads the weight once, 260 us against 310-450 packed), and so do
prefill chunks of more rows than the hint: there the packed kernel was no faster with
one thread and slower with two (96 rows: 1.0 ms plain, 1.4 ms packed).

Small weights are not packed: they stay in the cache between calls, so MKL's repacking is
cheap and the packed op's overhead dominates (the tiny preset, all weights under 0.4 MB:
a decode step of 4 went 0.73 -> 1.00 ms packed). PACK_MIN_BYTES is the line.

The packed kernel is a private torch op (torch.ops.mkldnn._linear_pointwise, what
torch.compile's CPU backend emits for a frozen Linear), so a pack is checked once against
the plain product and dropped, with the plain matmul kept, if the op is missing or wrong.
"""

from __future__ import annotations

from typing import Literal

import torch

Gemm = Literal["auto", "plain"]  # engine.cpu_gemm: auto prepacks where it can
CHECK_ROWS = 3  # the pack's self-check: a product of this many rows against the plain one
PACK_MIN_BYTES = 1 << 20  # smaller weights stay plain (the mid shape's smallest is 1 MiB)


class Weight:
    """w: [in, out] (the product is x [M, in] @ w -> [M, out]). `packed` is oneDNN's copy
    (from w.T) or None; both hold the same values, so the model's parameter count is w's."""

    def __init__(self, w: torch.Tensor, packed: torch.Tensor | None = None,
                 max_rows: int = 0) -> None:
        self.w = w
        self.packed = packed
        self.max_rows = max_rows  # products of 2..max_rows rows use `packed`

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: [M, in] contiguous -> [M, out]."""
        if self.packed is None or not 1 < x.shape[0] <= self.max_rows:
            return x @ self.w
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")


def use_onednn(gemm: Gemm, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether to prepack: auto, on CPU, in float32, with oneDNN built in."""
    return (gemm != "plain" and device.type == "cpu" and dtype == torch.float32
            and torch.backends.mkldnn.is_available())


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
