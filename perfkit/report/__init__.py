"""Renderers: one result model, many formats."""
