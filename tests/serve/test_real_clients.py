"""What real clients send: vLLM's and OpenAI's sampling fields (accepted, the ignored ones
reported), /tokenize and /detokenize, and the prefix-cache reset."""

from __future__ import annotations

from serve_http import http

MODEL = "default"


def test_vllm_bench_body_is_accepted(base_url: str) -> None:
    body = {"model": MODEL, "prompt": "t5 t6 t7", "repetition_penalty": 1.0, "max_tokens": 4,
            "logprobs": None, "stream": False, "ignore_eos": True, "temperature": 0}
    reply = http(f"{base_url}/v1/completions", body)
    assert reply.status == 200, reply.body
    assert "X-Perfkit-Ignored" not in reply.headers  # every value is the neutral one


def test_fields_that_change_nothing_are_reported_as_ignored(base_url: str) -> None:
    body = {"model": MODEL, "prompt": [5, 6], "max_tokens": 2, "temperature": 0.7,
            "top_k": 40, "top_p": 1.0, "seed": 3, "stop": ["x"], "min_p": 0.1,
            "repetition_penalty": 1.2, "user": "u1", "service_tier": "flex",
            "metadata": {"k": "v"}, "skip_special_tokens": True, "length_penalty": 1}
    reply = http(f"{base_url}/v1/completions", body)
    assert reply.status == 200, reply.body  # the sampling fields are applied: not named
    assert reply.headers["X-Perfkit-Ignored"] == "metadata, service_tier, user"


def test_wrong_type_of_sampling_field_is_400(base_url: str) -> None:
    reply = http(f"{base_url}/v1/completions",
                 {"model": MODEL, "prompt": [5], "top_k": "many"})
    assert reply.status == 400 and reply.json()["error"]["param"] == "top_k"


def test_tokenize_and_detokenize_round_trip(base_url: str) -> None:
    reply = http(f"{base_url}/tokenize", {"model": MODEL, "prompt": "t5 t6 t300",
                                          "add_special_tokens": False})
    assert reply.status == 200
    got = reply.json()
    assert got["tokens"] == [5, 6, 300] and got["count"] == 3 and got["max_model_len"] == 512
    back = http(f"{base_url}/detokenize", {"model": MODEL, "tokens": got["tokens"]}).json()
    assert back == {"prompt": "t5 t6 t300"}
    chat = http(f"{base_url}/tokenize", {"messages": [{"role": "user", "content": "t9"}]})
    assert chat.status == 200 and 9 in chat.json()["tokens"]


def test_tokenize_errors(base_url: str) -> None:
    assert http(f"{base_url}/detokenize", {"tokens": [99999]}).status == 400
    assert http(f"{base_url}/tokenize", {"prompt": "t5", "bogus": 1}).status == 400
    assert http(f"{base_url}/tokenize", {"model": "other", "prompt": "t5"}).status == 404


def test_reset_prefix_cache_when_idle(base_url: str) -> None:
    prompt = list(range(1, 65))
    for _ in range(2):
        http(f"{base_url}/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 1})
    reply = http(f"{base_url}/reset_prefix_cache", {})
    assert reply.status == 200 and reply.json() == {"reset": True}
    again = http(f"{base_url}/v1/completions", {"model": MODEL, "prompt": prompt,
                                                "max_tokens": 1}).json()
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
