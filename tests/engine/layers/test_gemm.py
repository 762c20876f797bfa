"""The prepacked weight products: the same values as x @ w, the plain path where packing
cannot or should not run, and the model's tokens unchanged by it."""

from __future__ import annotations

import pytest
import torch

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.layers import gemm
from perfkit.engine.layers.gemm import make_weight, use_onednn
from perfkit.workload import generate

CPU = torch.device("cpu")
needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                                  reason="torch built without oneDNN")


def weight_matrix(rows: int = 128, cols: int = 4096) -> torch.Tensor:
    """2 MiB of float32: just large enough to be packed."""
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(1)) / 8


def test_small_weights_stay_plain() -> None:
    assert make_weight(weight_matrix(128, 4095), batch_hint=16, prepack=True).packed is None


@needs_onednn
@pytest.mark.parametrize("m", [1, 2, 4, 8, 16])
def test_packed_product_equals_the_plain_one(m: int) -> None:
    w = weight_matrix()
    weight = make_weight(w, batch_hint=16, prepack=True)
    assert weight.packed is not None
    x = torch.randn(m, w.shape[0], generator=torch.Generator().manual_seed(m))
    torch.testing.assert_close(weight(x), x @ w, rtol=1e-5, atol=1e-5)


@needs_onednn
@pytest.mark.parametrize("m", [1, 3, 17, 96])
def test_few_rows_and_prefill_chunks_take_the_plain_product(
        m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    weight = make_weight(weight_matrix(), batch_hint=16, prepack=True)
    assert weight.packed is not None

    def refuse(*args: object) -> torch.Tensor:
        raise AssertionError(f"the packed kernel ran for {m} rows")

    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", refuse)
    x = torch.randn(m, 128)
    torch.testing.assert_close(weight(x), x @ weight.w)


def test_a_failing_pack_falls_back_to_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> torch.Tensor:
        raise RuntimeError("no oneDNN here")

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", broken)
    weight = make_weight(weight_matrix(), batch_hint=16, prepack=True)
    assert weight.packed is None
    x = torch.randn(4, 128)
    torch.testing.assert_close(weight(x), x @ weight.w)


@needs_onednn
def test_a_wrong_pack_falls_back_to_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.ops.mkldnn._linear_pointwise

    def off_by_one(*args: object) -> torch.Tensor:
        return real(*args) + 1.0

    monkeypatch.setattr(gemm.torch.ops.mkldnn, "_linear_pointwise", off_by_one)
    assert make_weight(weight_matrix(), batch_hint=16, prepack=True).packed is None


def test_packing_only_auto_on_cpu_on_one_thread_in_float32() -> None:
    onednn = torch.backends.mkldnn.is_available()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert not use_onednn("auto", CPU, torch.float32)
        torch.set_num_threads(1)
        assert use_onednn("auto", CPU, torch.float32) is onednn
    finally:
        torch.set_num_threads(threads)
    assert not use_onednn("plain", CPU, torch.float32)
    assert not use_onednn("auto", CPU, torch.bfloat16)
    assert not use_onednn("auto", torch.device("cuda"), torch.float32)


def tokens(cpu_gemm: str) -> dict[int, list[int]]:
    """The default profile (one thread) at hidden 512, intermediate 1024, vocab 1024:
    gate_up (4 MiB), down and the LM head (2 MiB) are packed, the attention's not."""
    prof = load_profile("default", Overrides(sets=(
        "model.hidden_size=512", "model.intermediate_size=1024", "model.vocab_size=1024",
        f"engine.cpu_gemm={cpu_gemm}", "engine.max_num_seqs=8", "workload.num_requests=12")))
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 12)
    return Engine(prof).run_to_completion(specs)


@needs_onednn
def test_generated_tokens_do_not_depend_on_the_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy tokens of a mixed batch (prefill chunks and decodes of 1..8 rows) are the
    same with and without prepacking, and the packed kernel did run."""
    calls = []
    real = torch.ops.mkldnn._linear_pointwise

    def counted(*args: object) -> torch.Tensor:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(gemm.torch.ops.mkldnn, "_linear_pointwise", counted)
    packed = tokens("auto")
    assert len(calls) > 100
    assert packed == tokens("plain")


def test_a_bad_cpu_gemm_is_refused() -> None:
    with pytest.raises(Exception, match="cpu_gemm"):
        load_profile("default", Overrides(sets=("engine.cpu_gemm=fast",)))
