"""A level's names: the one parse of what users type (--server-profile, report --level)
and the one stack key."""

import pytest

from perfkit.result.point import LoadPoint, slug_of


@pytest.mark.parametrize(("text", "slug"), [
    ("8", "8"), ("c=8", "8"), ("Concurrency 8", "8"), ("concurrency=8", "8"),
    ("level-8", "8"), (" c= 8 ", "8"), ("rate-2", "rate-2"), ("2/s", "rate-2"),
    ("rate 2.5/s", "rate-2.5"), ("level-rate-4", "rate-4"),
])
def test_every_spelling_of_a_level_gives_its_slug(text: str, slug: str) -> None:
    assert slug_of(text) == slug


def test_the_slug_round_trips_and_keys_add_the_repeat() -> None:
    for point in (LoadPoint(concurrency=16), LoadPoint(rate=2.5)):
        assert slug_of(point.short) == slug_of(point.label) == point.slug
    assert LoadPoint(concurrency=4).key() == "4"
    assert LoadPoint(rate=2.0).key(3, repeated=True) == "rate-2-r3"
