"""Profiles: schema, presets, units, typed decoding, TOML writing."""
