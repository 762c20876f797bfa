import json

from perfkit.stacks.speedscope import SCHEMA_URL, to_speedscope, write_speedscope

STACKS = {
    "main (app.py:1);work (app.py:5)": 7,
    "main (app.py:1);io (app.py:9);<module> (<string>:1)": 2,
    "main (app.py:1)": 1,
    "native_thing": 3,
}


def check_speedscope(doc: dict) -> None:
    """speedscope's file format: shared frames, sampled profiles, weights."""
    assert doc["$schema"] == SCHEMA_URL
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    assert len({json.dumps(f, sort_keys=True) for f in frames}) == len(frames)  # shared: no dups
    assert doc["profiles"]
    for prof in doc["profiles"]:
        assert prof["type"] == "sampled"
        assert prof["unit"] in ("none", "nanoseconds", "microseconds", "milliseconds", "seconds",
                                "bytes")
        assert len(prof["samples"]) == len(prof["weights"])
        assert all(isinstance(w, int) and w > 0 for w in prof["weights"])
        assert all(0 <= i < len(frames) for s in prof["samples"] for i in s)
        assert prof["startValue"] == 0
        assert prof["endValue"] == sum(prof["weights"])
    assert 0 <= doc.get("activeProfileIndex", 0) < len(doc["profiles"])


def test_structure_is_valid_and_frames_are_shared():
    doc = to_speedscope(STACKS, "level-4")
    check_speedscope(doc)
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert names.count("main") == 1  # one frame entry used by three samples
    prof = doc["profiles"][0]
    assert prof["endValue"] == 13
    assert prof["name"] == "level-4"


def test_samples_are_root_first_with_file_and_line():
    doc = to_speedscope({"main (app.py:1);work (app.py:5)": 7}, "x")
    frames = doc["shared"]["frames"]
    (sample,) = doc["profiles"][0]["samples"]
    assert [frames[i] for i in sample] == [
        {"name": "main", "file": "app.py", "line": 1},
        {"name": "work", "file": "app.py", "line": 5},
    ]
    assert to_speedscope({"native_thing": 1}, "x")["shared"]["frames"] == [{"name": "native_thing"}]


def test_written_file_is_json_and_valid(tmp_path):
    path = tmp_path / "a.speedscope.json"
    write_speedscope(path, STACKS, "a")
    check_speedscope(json.loads(path.read_text()))


def test_empty_profile_is_still_valid():
    doc = to_speedscope({}, "empty")
    check_speedscope(doc)
    assert doc["profiles"][0]["endValue"] == 0
