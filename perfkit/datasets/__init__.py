"""Workloads users bring: dataset and trace files read into records, records into requests."""
