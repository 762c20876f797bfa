"""Synthetic Llama-style decoder: real shapes, seeded random weights, paged attention.

RMSNorm -> attention (RoPE, GQA, paged KV) -> residual -> RMSNorm -> SwiGLU -> residual,
`num_layers` times, then a final RMSNorm and the LM head. The cost of a step is the
cost of the real model with these shapes; the tokens are meaningless but deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from perfkit.config.schema import ModelConfig
from perfkit.engine.layers.attention import AttentionMetadata, PagedAttention
from perfkit.engine.layers.gemm import Gemm, Weight, make_weight, use_onednn
from perfkit.engine.layers.kv_cache import TORCH_DTYPES


@dataclass
class LayerWeights:
    attn_norm: torch.Tensor  # [hidden]
    wqkv: torch.Tensor  # [hidden, (heads + 2 * kv_heads) * head_dim]
    wo: torch.Tensor  # [heads * head_dim, hidden]
    mlp_norm: torch.Tensor  # [hidden]
    w_gate_up: torch.Tensor  # [hidden, 2 * intermediate]
    w_down: torch.Tensor  # [intermediate, hidden]


@dataclass
class LayerGemms:
    """The layer's weight products (the same tensors, prepacked on CPU: see gemm.py)."""

    wqkv: Weight
    wo: Weight
    w_gate_up: Weight
    w_down: Weight


def _init(shape: tuple[int, ...], gen: torch.Generator, dtype: torch.dtype,
          device: torch.device) -> torch.Tensor:
    """Normal(0, 1/sqrt(fan_in)): activations keep unit scale through the layers."""
    w = torch.randn(shape, generator=gen, dtype=torch.float32, device=device)
    return (w / math.sqrt(shape[0])).to(dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    if x.dtype == torch.float32:  # torch's one kernel, the same values as below
        return torch.nn.functional.rms_norm(x, weight.shape, weight, eps)
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * weight


def rope_tables(max_len: int, head_dim: int, theta: float,
                device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: [max_len, head_dim // 2] (float32)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    freqs = torch.outer(torch.arange(max_len, device=device).float(), inv)
    return freqs.cos(), freqs.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [T, heads, head_dim]; cos/sin: [T, head_dim // 2]. Rotate-half convention."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


class SyntheticModel:
    """Weights on the attention's device; its KV cache is the one `attention` is bound to.
    The weight count is ModelConfig.num_parameters (a test checks it). `batch_hint`: the
    decode batch the CPU weights are packed for (max_num_seqs)."""

    def __init__(self, cfg: ModelConfig, attention: PagedAttention, max_model_len: int,
                 seed: int = 0, *, gemm: Gemm = "auto", batch_hint: int = 16) -> None:
        self.cfg = cfg
        self.attention = attention
        self.device = device = attention.device
        self.dtype = TORCH_DTYPES[cfg.dtype]
        gen = torch.Generator(device=device).manual_seed(seed)
        h, hd, inter = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
        qkv = (cfg.num_heads + 2 * cfg.num_kv_heads) * hd

        def init(*shape: int) -> torch.Tensor:
            return _init(shape, gen, self.dtype, device)

        ones = torch.ones(h, dtype=self.dtype, device=device)
        self.embed = init(cfg.vocab_size, h) * math.sqrt(h)  # unit-scale rows
        self.layers = [
            LayerWeights(ones, init(h, qkv), init(cfg.num_heads * hd, h), ones,
                         init(h, 2 * inter), init(inter, h))
            for _ in range(cfg.num_layers)
        ]
        self.final_norm = ones
        self.lm_head = init(h, cfg.vocab_size)
        self.cos, self.sin = rope_tables(max_model_len, hd, cfg.rope_theta, device)
        pack = use_onednn(gemm, device, self.dtype)

        def weight(w: torch.Tensor) -> Weight:
            return make_weight(w, batch_hint, pack)

        self.gemms = [LayerGemms(weight(w.wqkv), weight(w.wo), weight(w.w_gate_up),
                                 weight(w.w_down)) for w in self.layers]
        self.head = weight(self.lm_head)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                meta: AttentionMetadata, logits_index: torch.Tensor) -> torch.Tensor:
        """input_ids, positions: [T]; logits_index: [S] rows of the batch to project.
        Returns logits [S, vocab] (float32)."""
        cos, sin = self.cos[positions], self.sin[positions]
        x = self.embed[input_ids]  # [T, hidden]
        for layer, (w, g) in enumerate(zip(self.layers, self.gemms, strict=True)):
            x = x + self._attention(rms_norm(x, w.attn_norm), g, layer, meta, cos, sin)
            x = x + self._mlp(rms_norm(x, w.mlp_norm), g)
        x = rms_norm(x[logits_index], self.final_norm)
        return self.head(x).float()

    def _attention(self, x: torch.Tensor, w: LayerGemms, layer: int,
                   meta: AttentionMetadata, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        cfg, t = self.cfg, x.shape[0]
        q_size, kv_size = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        qkv = w.wqkv(x)  # [T, q_size + 2 kv_size]: q and k side by side, rotated at once
        qk = apply_rope(qkv[:, :q_size + kv_size].view(t, -1, cfg.head_dim), cos, sin)
        q, k = qk[:, :cfg.num_heads], qk[:, cfg.num_heads:]  # [T, heads | kv_heads, d] views
        v = qkv[:, q_size + kv_size:].reshape(t, cfg.num_kv_heads, cfg.head_dim)
        out = self.attention.forward(q, k, v, layer, meta)  # [T, heads, head_dim]
        return w.wo(out.reshape(t, q_size))

    def _mlp(self, x: torch.Tensor, w: LayerGemms) -> torch.Tensor:
        gate, up = w.w_gate_up(x).chunk(2, dim=-1)
        return w.w_down(torch.nn.functional.silu(gate) * up)

