"""Where perfkit's documentation is published, and the address of one finding's entry.

One constant: mkdocs.yml's `site_url` is the same address (tests/docs keeps them equal).
The site is built from docs/ (`mkdocs build`); until it is published there, the links
resolve to nothing, and the catalogue is docs/findings.md in the source.
"""

from __future__ import annotations

DOCS_URL = "https://perfkit.readthedocs.io/en/latest/"


def finding_url(finding_id: str) -> str:
    """The findings catalogue's entry for one id: its heading's anchor is the id."""
    return f"{DOCS_URL}findings/#{finding_id}"
