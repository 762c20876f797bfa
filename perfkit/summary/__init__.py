"""Per-level statistics, the knee and findings: pure functions over the result model."""
