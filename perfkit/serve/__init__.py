"""`perfkit serve`: the in-process engine behind an OpenAI-compatible HTTP server.

    tokens.py     text <-> token ids (the synthetic model has no tokenizer)
    fields.py     every request field: applied, ignored (X-Perfkit-Ignored) or refused
    protocol.py   request bodies -> typed `GenerateRequest`, or an `ApiError`
    prompts.py    prompts (batched: one choice each) and chat messages -> token ids
    sampling.py   sampling, stop and logprobs fields -> the engine's SamplingParams
    structured.py tools / tool_choice / response_format -> a grammar for the guard
    choices.py    one choice: engine events -> text, logprobs, tool calls
    logprobs.py   logprobs in OpenAI's shapes; tool_calls.py: tool calls, whole or deltas
    responses.py  OpenAI-shaped JSON bodies and SSE chunks
    state.py      the engine, admission (engine reasons + token quota), in-flight requests
    generate.py   one request end to end: submit, stream or collect, cancel on disconnect
    metrics.py    Prometheus text with vLLM's metric names
    app.py        routes and error middleware (aiohttp.web)
    lifecycle.py  bind, start, drain on SIGTERM/SIGINT, stop
    testing.py    `running_server(...)`: a server on a free loopback port in a thread
"""
