import pytest
import torch

from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.layers.kv_cache import KVCache

LAYERS, BLOCKS, BS, KVH, D = 3, 6, 4, 2, 3


def make_cache() -> KVCache:
    return KVCache(KVSpec(BLOCKS, BS, LAYERS, KVH, D, "float32"), torch.device("cpu"))


def test_layout_is_one_zeroed_allocation():
    kv = make_cache()
    assert len(kv.k) == len(kv.v) == LAYERS
    assert kv.k[1].shape == (BLOCKS, BS, KVH, D)
    assert kv.num_blocks == BLOCKS and kv.block_size == BS
    layer_bytes = BLOCKS * BS * KVH * D * 4
    assert kv.k[1].data_ptr() - kv.k[0].data_ptr() == layer_bytes
    assert kv.v[0].data_ptr() - kv.k[0].data_ptr() == LAYERS * layer_bytes
    assert kv.nbytes() == 2 * LAYERS * layer_bytes
    assert not kv.data.any()


def test_write_lands_at_slots():
    kv = make_cache()
    slots = torch.tensor([5, 0, 23, 9])  # (block, offset): (1, 1) (0, 0) (5, 3) (2, 1)
    k = torch.randn(4, KVH, D)
    v = torch.randn(4, KVH, D)
    kv.write(1, slots, k, v)
    for i, (block, off) in enumerate([(1, 1), (0, 0), (5, 3), (2, 1)]):
        assert torch.equal(kv.k[1][block, off], k[i])
        assert torch.equal(kv.v[1][block, off], v[i])
    assert int((kv.k[1] != 0).any(-1).any(-1).sum()) == 4  # nothing else written
    assert not kv.k[0].any() and not kv.k[2].any() and not kv.v[0].any()


def test_copy_blocks_copies_every_layer_reading_sources_first():
    kv = make_cache()
    kv.data.copy_(torch.randn_like(kv.data))
    before = kv.data.clone()
    kv.copy_blocks([(1, 4), (4, 0)])  # 4 is both a destination and a source
    for layer in range(LAYERS):
        for cache, old in ((kv.k, before[0]), (kv.v, before[1])):
            assert torch.equal(cache[layer][4], old[layer][1])
            assert torch.equal(cache[layer][0], old[layer][4])  # old contents of 4
            for untouched in (1, 2, 3, 5):
                assert torch.equal(cache[layer][untouched], old[layer][untouched])


def test_copy_blocks_empty_is_a_no_op():
    kv = make_cache()
    kv.copy_blocks([])
    assert not kv.data.any()


@pytest.mark.parametrize("pairs", [[(0, 1), (2, 1)], [(0, BLOCKS)], [(-1, 2)]])
def test_copy_blocks_rejects_bad_pairs(pairs):
    with pytest.raises(ValueError):
        make_cache().copy_blocks(pairs)


def test_rejects_empty_dimensions():
    with pytest.raises(ValueError, match="num_blocks"):
        KVCache(KVSpec(0, BS, 1, KVH, D), "cpu")
