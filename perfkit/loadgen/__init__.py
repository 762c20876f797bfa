"""The load generator: the HTTP client (client.py, sse.py, text.py) and its own cost and
error (overhead.py), one worker's share of a level (core.py), and at scale worker
processes on one host or Ray actors across hosts (worker.py, pool.py, local.py,
ray_actors.py), with a coordinator that deals one schedule out (deal.py) and merges the
records streamed back."""
