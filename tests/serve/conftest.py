"""A server per module: the default profile's tiny model on one thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_http import SETS

from perfkit.serve.testing import running_server


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with running_server("default", sets=SETS) as url:
        yield url
