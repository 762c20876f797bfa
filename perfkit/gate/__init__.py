"""The CI regression gate: rules, inputs, statistics, decisions, rendering."""
