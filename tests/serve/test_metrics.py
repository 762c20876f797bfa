"""/metrics parses as Prometheus text and as OpenMetrics (prometheus_client's parsers, the
OpenMetrics one strict); perfkit's own names follow Prometheus's conventions, vLLM's keep
their colon; `promtool check metrics` (when installed) reports nothing else."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as text_parse
from serve_http import http

MODEL = "default"


def scrape(base_url: str, accept: str | None = None) -> tuple[str, str]:
    request = urllib.request.Request(f"{base_url}/metrics",
                                     headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.headers["Content-Type"], reply.read().decode()


def test_text_and_openmetrics_parse_with_the_same_samples(base_url: str) -> None:
    http(f"{base_url}/v1/completions", {"model": MODEL, "prompt": "a b", "max_tokens": 3})
    kind, text = scrape(base_url)
    assert kind.startswith("text/plain; version=0.0.4")
    om_kind, om = scrape(base_url, "application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
    assert om_kind.startswith("application/openmetrics-text") and om.endswith("# EOF\n")

    def samples(families) -> dict[str, float]:
        return {s.name: s.value for f in families for s in f.samples
                if not s.labels.get("reason") and not s.labels.get("finished_reason")}

    plain, strict = samples(text_parse(text)), samples(om_parse(om))
    assert plain.keys() == strict.keys()
    assert strict["perfkit_engine_steps_total"] >= 3 and strict["vllm:generation_tokens_total"]
    own = [n for n in plain if not n.startswith("vllm:")]
    assert own and all(n.startswith("perfkit_") and ":" not in n for n in own)


def test_promtool_finds_only_the_vllm_colons(base_url: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    _, text = scrape(base_url)
    found = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                           capture_output=True, timeout=60)
    problems = [line for line in (found.stdout + found.stderr).splitlines() if line.strip()]
    assert problems, "promtool found vLLM's colons before: has its output changed?"
    assert all(line.startswith("vllm:") and "contain ':'" in line for line in problems), problems
