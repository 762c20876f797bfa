"""Temporary: the file helpers moved to perfkit.files (this module goes once no one imports it)."""

from perfkit.files import atomic_write_text, dumps

__all__ = ["atomic_write_text", "dumps"]
