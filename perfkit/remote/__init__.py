"""Sweep a remote OpenAI-compatible streaming server (`perfkit sweep --target URL`).

target.py resolves the options, client.py streams one request, sse.py reads the
stream, scrape.py polls the server's Prometheus metrics, overhead.py measures the
client itself, driver.py runs one level, level.py builds its result.
"""
