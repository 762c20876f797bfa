"""Sweep a remote OpenAI-compatible streaming server (`perfkit sweep --target URL`).

target.py resolves the options (options.py) and reaches the server, driver.py runs one
level (in this process, or over perfkit.loadgen's workers), scrape.py polls the server's
Prometheus metrics, profile.py drives its profiler, stream.py reads how responses
arrived, level.py builds the level's result. The HTTP client itself is perfkit.loadgen's.
"""
