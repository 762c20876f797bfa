"""Random and mutated TOML never produces anything but a ProfileError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.config.profile import ProfileError, builtin_dir, load_profile

BASE = (builtin_dir() / "default.toml").read_text()
FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def _try(tmp: Path, text: str) -> None:
    path = tmp / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    try:
        load_profile(str(path))
    except ProfileError as err:
        assert str(err)


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.text(max_size=200))
def test_random_text(tmp_path, text):
    _try(tmp_path, text)


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.integers(0, len(BASE) - 1), st.integers(0, 20), st.text(max_size=12))
def test_mutated_default(tmp_path, pos, cut, insert):
    _try(tmp_path, BASE[:pos] + insert + BASE[pos + cut:])


scalars = st.one_of(st.integers(-5, 5000), st.floats(allow_nan=False), st.booleans(),
                    st.text(max_size=5), st.lists(st.integers(-3, 64), max_size=4))


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.sampled_from(["engine", "workload", "sweep", "slo", "model", "workload.prompt_len",
                        "workload.arrival", "workload.shared_prefix", "gate"]),
       st.sampled_from(["block_size", "num_blocks", "mean", "kind", "concurrency", "rate",
                        "ttft_s", "preset", "max", "min", "share", "length", "rules", "x"]),
       scalars)
def test_typed_values(tmp_path, section, key, value):
    import json

    literal = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
    _try(tmp_path, f'extends = "default"\n[{section}]\n{key} = {literal}\n')
