"""Samplers that run beside the workload, and what the machine is."""
