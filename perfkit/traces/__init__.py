"""OpenTelemetry around a sweep: the W3C trace context perfkit sends with every remote
request (context.py), the OTLP wire format (otlp.py, the optional `traces` extra), the
receiver of a server's spans (receiver.py, store.py), their join with perfkit's requests
after each level (join.py, timings.py), and the export of perfkit's own spans (export.py).
session.py starts and stops all of it around a sweep."""
