"""The calibration file: round trip, and every bad input refused with the reason."""

from __future__ import annotations

import json

import pytest
from predict_fixtures import calibration, fixed_profile, write

from perfkit.config.profile import Overrides, load_profile
from perfkit.errors import PerfkitError
from perfkit.predict.calibration import SCHEMA, check_against, load_calibration


def test_round_trip(tmp_path):
    profile = fixed_profile()
    path = write(tmp_path / "cal.json", profile)
    assert load_calibration(path) == calibration(profile)
    assert json.loads(path.read_text())["schema"] == SCHEMA


@pytest.mark.parametrize(("text", "match"), [
    (None, "no such file"),
    ("{not json", "not a readable JSON"),
    ('{"schema": "perfkit.calibration/0"}', "is not 'perfkit.calibration/1'"),
    ('{"device": "cpu"}', "not a perfkit calibration"),
    ('{"schema": "perfkit.calibration/1", "device": 3}', "malformed calibration"),
])
def test_bad_files_say_why(tmp_path, text, match):
    path = tmp_path / "cal.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(PerfkitError, match=match):
        load_calibration(path)


def test_a_negative_coefficient_in_the_file_is_malformed(tmp_path):
    path = write(tmp_path / "cal.json")
    doc = json.loads(path.read_text())
    doc["step"]["decode_seq_s"] = -1.0
    path.write_text(json.dumps(doc))
    with pytest.raises(PerfkitError, match="decode_seq_s must be finite and >= 0"):
        load_calibration(path)


def test_another_model_shape_is_refused():
    cal = calibration(load_profile("default"))
    small = load_profile("default", Overrides(model="small"))
    with pytest.raises(PerfkitError, match=r"another model shape .*num_layers 2 vs 4"):
        check_against(cal, small, "cal.json")


def test_other_cost_settings_warn_and_block_size_does_not():
    cal = calibration(load_profile("default"))
    other = load_profile("default", Overrides(sets=("engine.cpu_threads=2",
                                                    "engine.block_size=32")))
    (warning,) = check_against(cal, other, "cal.json")
    assert "engine.cpu_threads was 1 when calibrated, 2 now" in warning
