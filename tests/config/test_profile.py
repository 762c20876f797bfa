from __future__ import annotations

import sys

import pytest

from perfkit.config.presets import MODEL_PRESETS
from perfkit.config.profile import (
    Overrides,
    ProfileError,
    builtin_names,
    load_profile,
    pool_blocks,
    profile_dict,
    profile_sha256,
)
from perfkit.config.toml_out import dumps

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REQUIRED = {"default", "sharegpt", "alpaca", "shared-prefix", "long-context", "bursty",
            "tool-calls", "llama3-8b-gpu"}


def test_builtin_profiles_present():
    assert set(builtin_names()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_builtin_loads_and_round_trips(name):
    prof = load_profile(name)
    assert prof.name == name
    text = dumps(profile_dict(prof))
    again = tomllib.loads(text)
    assert again == profile_dict(prof)


def test_sharegpt_matches_paper_settings():
    prof = load_profile("sharegpt")
    assert prof.engine.max_model_len == 2048
    assert prof.workload.prompt_len.mean == 161
    assert prof.workload.output_len.mean == 338


def test_extends_overrides_parts(write_profile):
    path = write_profile('extends = "default"\n[engine]\nblock_size = 32\n')
    prof = load_profile(str(path))
    base = load_profile("default")
    assert prof.engine.block_size == 32
    assert prof.engine.num_blocks == base.engine.num_blocks
    assert prof.workload == base.workload
    assert prof.name == "p"


def test_extends_relative_path_and_cycle(write_profile, tmp_path):
    write_profile('extends = "b.toml"\n', "a.toml")
    write_profile('extends = "a.toml"\n', "b.toml")
    with pytest.raises(ProfileError, match="cycle"):
        load_profile(str(tmp_path / "a.toml"))


def test_model_preset_and_explicit_numbers(write_profile):
    path = write_profile('[model]\npreset = "llama3-8b"\nnum_layers = 2\n')
    prof = load_profile(str(path))
    assert prof.model.num_layers == 2
    assert prof.model.hidden_size == MODEL_PRESETS["llama3-8b"]["hidden_size"]


def test_opt13b_kv_bytes_per_token_is_800kb():
    prof = load_profile("sharegpt", Overrides(model="opt-13b"))
    assert prof.model.kv_bytes_per_token == 819_200  # PagedAttention paper: ~800 KB


def test_kv_memory_sizes_the_pool():
    prof = load_profile("sharegpt", Overrides(model="opt-13b", sets=('engine.kv_memory="12GiB"',)))
    per_block = 819_200 * 16
    assert pool_blocks(prof) == 12 * 2**30 // per_block


def test_set_overrides_are_typed_and_nested():
    prof = load_profile("default", Overrides(sets=("engine.block_size=32",
                                                   "workload.prompt_len.mean=50",
                                                   "engine.prefix_caching=false")))
    assert prof.engine.block_size == 32
    assert prof.workload.prompt_len.mean == 50.0
    assert prof.engine.prefix_caching is False


def test_hash_changes_with_content():
    a = load_profile("default")
    b = load_profile("default", Overrides(sets=("engine.block_size=32",)))
    assert profile_sha256(a) == profile_sha256(load_profile("default"))
    assert profile_sha256(a) != profile_sha256(b)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[engine]\nblock_sise = 16\n", "block_sise"),
        ("[engine]\nblock_size = 'x'\n", "engine.block_size"),
        ("[engine]\nblock_size = 0\n", "engine.block_size"),
        ("[engine]\nblock_size = true\n", "engine.block_size"),
        ("[engine\nblock_size = 16\n", "TOML syntax error"),
        ("[workload.prompt_len]\nkind = 'zipf'\n", "workload.prompt_len.kind"),
        ("[model]\npreset = 'llama9'\n", "model.preset"),
        ("[model]\npreset = 'tiny'\nnum_kv_heads = 3\n", "model.num_kv_heads"),
        ("[sweep]\nnvml_hz = 50\n", "sweep.nvml_hz"),
        ("[sweep]\nconcurrency = [1, -2]\n", "sweep.concurrency[1]"),
        ("engine = 3\n", "engine"),
        ("extends = 'nope'\n", "nope"),
    ],
)
def test_bad_profiles_name_the_field(write_profile, text, needle):
    path = write_profile(text)
    with pytest.raises(ProfileError) as err:
        load_profile(str(path))
    message = str(err.value)
    assert needle in message
    assert str(path) in message or "no built-in profile" in message


def test_misspelled_key_suggests_the_valid_one(write_profile):
    path = write_profile("[engine]\nblock_sise = 16\n")
    with pytest.raises(ProfileError, match="did you mean 'block_size'"):
        load_profile(str(path))


def test_missing_file_and_unknown_name():
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile("/nonexistent/x.toml")
    with pytest.raises(ProfileError, match="built-in"):
        load_profile("no-such-profile")


def test_bad_set_names_the_option():
    with pytest.raises(ProfileError, match=r"--set engine\.block_sise.*block_size"):
        load_profile("default", Overrides(sets=("engine.block_sise=16",)))
    with pytest.raises(ProfileError, match=r"SECTION\.KEY=VALUE"):
        load_profile("default", Overrides(sets=("block_size",)))


def test_a_uniform_length_takes_no_mean() -> None:
    """The default profile's output_len is uniform 16..48: a --set of its mean changed
    nothing before (every length stayed in 16..48); now it names the keys that do."""
    with pytest.raises(ProfileError, match=r"--set workload.output_len.mean: "
                       r"workload.output_len is uniform between min and max \(16..48\)"):
        load_profile("default", Overrides(sets=("workload.output_len.mean=128",)))


def test_a_drawn_mean_outside_its_bounds_names_both_keys() -> None:
    sets = ('workload.output_len.kind="lognormal"', "workload.output_len.mean=128",
            "workload.output_len.std=10")
    with pytest.raises(ProfileError, match=r"output_len.mean: 128 lies above max \(48\)"):
        load_profile("default", Overrides(sets=sets))
    ok = load_profile("default", Overrides(sets=(*sets, "workload.output_len.max=256")))
    assert ok.workload.output_len.max == 256


def test_a_fixed_length_is_its_mean_whatever_the_bounds() -> None:
    import random

    from perfkit.workload import sample_length

    prof = load_profile("default", Overrides(sets=('workload.output_len.kind="fixed"',
                                                   "workload.output_len.mean=8")))
    dist = prof.workload.output_len
    assert (dist.min, dist.max) == (16, 48)  # bounds of the drawn kinds, not of fixed
    assert sample_length(dist, random.Random(0)) == 8
