"""`perfkit serve`: the in-process engine behind an OpenAI-compatible HTTP server.

    tokens.py     text <-> token ids (the synthetic model has no tokenizer)
    protocol.py   request bodies -> typed `GenerateRequest`, or an `ApiError`
    responses.py  OpenAI-shaped JSON bodies and SSE chunks
    state.py      the engine, admission (engine reasons + token quota), in-flight requests
    generate.py   one request end to end: submit, stream or collect, cancel on disconnect
    metrics.py    Prometheus text with vLLM's metric names
    app.py        routes and error middleware (aiohttp.web)
    lifecycle.py  bind, start, drain on SIGTERM/SIGINT, stop
    testing.py    `running_server(...)`: a server on a free loopback port in a thread
"""
