"""URLs given on the command line: one check, one error."""

from __future__ import annotations

from urllib.parse import urlsplit

from perfkit.errors import PerfkitError


def check_url(url: str, option: str) -> str:
    """An absolute http(s) URL without a trailing slash."""
    try:
        parsed = urlsplit(url)
        ok = parsed.scheme in ("http", "https") and bool(parsed.hostname)
        parsed.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        ok = False
    if not ok:
        raise PerfkitError(f"{option}: expected an http(s) URL like "
                           f"http://127.0.0.1:8000/v1, got {url!r}")
    return url.rstrip("/")
