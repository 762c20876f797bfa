"""Every request field of OpenAI's and vLLM's completions and chat APIs that common clients
send, and what perfkit serve does with it. A field missing here is refused as unknown (a
typo gets a 400 naming it, not silence).

    APPLIED        parsed and honoured (sampling.py, structured.py, protocol.py)
    IGNORED        accepted; a value other than a neutral one is named in X-Perfkit-Ignored
    NEUTRAL_ONLY   accepted at the values listed, else a 400 naming the field: perfkit
                   cannot honour another
"""

from __future__ import annotations

from typing import Any

_NUM = (int, float)
_ANY = (str, int, float, bool, list, dict)

# field -> accepted JSON types (None is always accepted: "not set")
APPLIED: dict[str, tuple[type, ...]] = {
    "model": (str,), "max_tokens": (int,), "stream": (bool,), "stream_options": (dict,),
    "priority": (int,), "tool_call": (bool,),
    "temperature": _NUM, "top_p": _NUM, "top_k": (int,), "min_p": _NUM, "seed": (int,),
    "presence_penalty": _NUM, "frequency_penalty": _NUM, "repetition_penalty": _NUM,
    "logit_bias": (dict,), "stop": (str, list), "stop_token_ids": (list,),
    "ignore_eos": (bool,), "min_tokens": (int,), "include_stop_str_in_output": (bool,),
    "logprobs": (int, bool), "prompt_logprobs": (int,), "response_format": (dict,),
    "guided_json": (dict, str), "guided_choice": (list,), "structured_outputs": (dict,),
    "truncate_prompt_tokens": (int,),
    # several outputs (protocol.py): n choices, best_of samples, vLLM's beam search
    "n": (int,), "best_of": (int,), "use_beam_search": (bool,),
}
# prompt and messages are typed by prompts.py (its messages name the element at fault)
COMPLETION_ONLY = {"prompt": _ANY, "echo": (bool,)}
CHAT_ONLY = {"messages": _ANY, "max_completion_tokens": (int,), "tools": (list,),
             "tool_choice": (str, dict), "top_logprobs": (int,),
             "parallel_tool_calls": (bool,)}

# field -> values that change nothing (absent from X-Perfkit-Ignored then)
IGNORED: dict[str, tuple[Any, ...]] = {
    "user": (), "service_tier": ("auto", "default"), "metadata": ({},), "store": (False,),
    "length_penalty": (1,), "skip_special_tokens": (True, False),
    "spaces_between_special_tokens": (True, False), "add_special_tokens": (True, False),
    "bad_words": ([],), "allowed_token_ids": (), "request_id": (), "cache_salt": (),
    "return_tokens_as_token_ids": (False,), "prompt_cache_key": (), "safety_identifier": (),
    "reasoning_effort": (), "verbosity": (), "vllm_xargs": ({},), "kv_transfer_params": (),
    "guided_decoding_backend": (), "guided_whitespace_pattern": (),
    "logits_processors": ([],), "return_token_ids": (False,), "detokenize": (True,),
    # chat only (vLLM's chat template options; perfkit's template is fixed: tokens.py)
    "add_generation_prompt": (True,), "continue_final_message": (False,),
    "chat_template": (), "chat_template_kwargs": ({},), "documents": ([],),
    "mm_processor_kwargs": ({},), "web_search_options": (), "modalities": (["text"],),
    "echo": (False,),  # chat's (vLLM: prepend the last message); completions apply theirs
}
CHAT_IGNORED = frozenset({"add_generation_prompt", "continue_final_message", "chat_template",
                          "chat_template_kwargs", "documents", "mm_processor_kwargs",
                          "web_search_options", "modalities", "echo"})

# field -> (the values perfkit honours, what to say otherwise)
NEUTRAL_ONLY: dict[str, tuple[tuple[Any, ...], str]] = {
    "suffix": (("",), "is not supported (no fill-in-the-middle)"),
    "audio": ((), "is not supported (text output only)"),
    "prediction": ((), "is not supported (no predicted outputs)"),
    "functions": ((), "is deprecated and not supported; send tools"),
    "function_call": ((), "is deprecated and not supported; send tool_choice"),
    "guided_regex": ((), "is not supported (JSON schemas and choices only)"),
    "guided_grammar": ((), "is not supported (JSON schemas and choices only)"),
    "structural_tag": ((), "is not supported (JSON schemas and choices only)"),
}
COMPLETION_REFUSED = frozenset({"suffix", "guided_regex", "guided_grammar", "structural_tag"})
CHAT_REFUSED = frozenset({"audio", "prediction", "functions", "function_call",
                          "guided_regex", "guided_grammar", "structural_tag"})


def allowed_fields(chat: bool) -> frozenset[str]:
    own = CHAT_ONLY if chat else COMPLETION_ONLY
    ignored = set(IGNORED) if chat else set(IGNORED) - CHAT_IGNORED
    refused = CHAT_REFUSED if chat else COMPLETION_REFUSED
    return frozenset({*APPLIED, *own, *ignored, *refused})


def types_of(key: str, chat: bool) -> tuple[type, ...]:
    """The JSON types a field accepts (IGNORED and NEUTRAL_ONLY take any)."""
    own = CHAT_ONLY if chat else COMPLETION_ONLY
    return own.get(key) or APPLIED.get(key) or _ANY


def ignored_fields(body: dict[str, Any], chat: bool) -> tuple[str, ...]:
    """The accepted fields this request sets to a value that changes nothing here."""
    keys = IGNORED.keys() if chat else IGNORED.keys() - CHAT_IGNORED
    return tuple(sorted(key for key in keys
                        if body.get(key) is not None and body[key] not in IGNORED[key]))
