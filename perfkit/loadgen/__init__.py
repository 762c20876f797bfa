"""The load generator at scale: worker processes on one host, Ray actors across hosts,
a coordinator that deals one schedule out and merges the records streamed back, and the
client's own error (perfkit.remote holds the HTTP client each worker runs)."""
