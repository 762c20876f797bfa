"""Comparability of two results, gate rules from profiles and files, malformed input."""

import copy
import re

import pytest
from gate_fixtures import noisy_doc, row, run

from perfkit.errors import PerfkitError
from perfkit.gate.rules import DEFAULT_RULES, METRICS

# ---- comparability and rules --------------------------------------------------------------


def test_device_class_mismatch_is_refused_unless_allowed():
    base = noisy_doc(20)
    cur = noisy_doc(21, device_class="cuda:NVIDIA H200")
    with pytest.raises(PerfkitError, match=r"cpu:Test CPU.*cuda:NVIDIA H200.*--allow-mismatch"):
        run(base, cur)
    result = run(base, cur, allow_mismatch=True)
    assert any("device class differs" in n for n in result.notes)


def test_profile_mismatch_names_the_differing_key():
    base = noisy_doc(22)
    cur = noisy_doc(23, sha256="b" * 64, resolved={"name": "test", "engine": {"block_size": 32}})
    with pytest.raises(PerfkitError, match=re.escape("engine.block_size: 16 vs 32")):
        run(base, cur)


def test_profiles_differing_only_in_gate_rules_compare():
    base = noisy_doc(24)
    cur = noisy_doc(25, sha256="b" * 64, gate_rules={"ttft_p50": {"rel_tol": 0.5}})
    result = run(base, cur)
    assert any("differ only in name, description or [gate]" in n for n in result.notes)


def test_profiles_differing_only_in_name_or_description_compare():
    base = noisy_doc(24)
    resolved = {"name": "renamed", "description": "new words", "engine": {"block_size": 16}}
    cur = noisy_doc(25, sha256="b" * 64, resolved=resolved)
    assert run(base, cur).verdict == "pass"


def test_profile_rules_override_defaults_field_by_field():
    base = noisy_doc(26, gate_rules={"ttft_p50": {"rel_tol": 0.5}})
    cur = noisy_doc(27, ttft_factor=1.2)
    r = row(run(base, cur), "c=1", "ttft_p50")
    assert r.verdict == "ok" and r.tolerance == pytest.approx(0.5)


def test_profile_rule_flipping_direction_warns():
    base = noisy_doc(28, gate_rules={"throughput": {"direction": "lower", "rel_tol": 0.1}})
    assert any("opposite" in n and "throughput" in n for n in run(base, noisy_doc(29)).notes)


def test_unknown_metric_in_profile_rules_is_refused():
    with pytest.raises(PerfkitError, match="did you mean 'ttft_p50'"):
        run(noisy_doc(30, gate_rules={"ttft_p5O": {}}), noisy_doc(31))


@pytest.mark.parametrize(("text", "message"), [
    ("[rules.tpot_p95]\nrel_tol = 0.1\n", "unknown metric 'tpot_p95'; did you mean 'tpot_p99'"),
    ("[rules.ttft_p50]\nrel_tol = 'ten'\n", "rules.ttft_p50.rel_tol: expected a number"),
    ("[rules.ttft_p50]\ndirection = 'down'\n", "expected 'lower' or 'higher'"),
    ("[rules.ttft_p50]\nrel_tol = -1\n", "rules.ttft_p50.rel_tol"),
    ("[rule.ttft_p50]\nrel_tol = 0.1\n", "unknown key 'rule'; did you mean 'rules'"),
    ("[rules.ttft_p50\n", "TOML syntax error"),
])
def test_bad_rules_file_is_refused_clearly(tmp_path, text, message):
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(PerfkitError, match="--rules .*" + re.escape(message)):
        run(noisy_doc(32), noisy_doc(33), rules_file=path)


def test_rules_file_overrides_profile_and_defaults(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text("[rules.output_tokens]\nrequired = false\n[rules.throughput]\nabs_tol = 1e9\n")
    base = noisy_doc(34)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["counts"]["output_tokens"] += 1
    result = run(base, cur, rules_file=path)
    assert result.verdict == "pass"
    r = row(result, "c=1", "throughput")
    assert r.direction == "higher" and r.verdict == "ok"  # direction kept from the default
    assert r.tolerance == pytest.approx(1.0)  # 1e9 tok/s: the whole way down to 0


def test_malformed_documents_are_refused():
    base = noisy_doc(35)
    for breakage in ("levels", "environment", "requests"):
        cur = copy.deepcopy(base)
        if breakage == "requests":
            cur["levels"][0]["requests"] = [{"ttft_s": 1.0}]
        else:
            del cur[breakage]
        with pytest.raises(PerfkitError, match=re.escape("cur.json: malformed")):
            run(base, cur)


def test_every_metric_has_a_default_rule():
    assert set(DEFAULT_RULES) == set(METRICS)
