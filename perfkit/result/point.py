"""A load point: one closed-loop concurrency or one open-loop arrival rate, and its labels."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class LoadPoint:
    """Exactly one of the two is set."""

    concurrency: int | None = None  # closed loop: clients, each with one request in flight
    rate: float | None = None  # open loop: requests/s

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a load point has exactly one of concurrency and rate")

    @property
    def closed(self) -> bool:
        return self.rate is None

    @property
    def x(self) -> float:
        """The load on one axis (concurrency or requests/s)."""
        return float(self.concurrency if self.rate is None else self.rate)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        """Words: 'concurrency 4' or 'rate 2/s'."""
        return f"concurrency {self.concurrency}" if self.rate is None else f"rate {self.rate:g}/s"

    @property
    def short(self) -> str:
        """Table cells: 'c=4' or '2/s'."""
        return f"c={self.concurrency}" if self.rate is None else f"{self.rate:g}/s"

    @property
    def slug(self) -> str:
        """File names: '4' or 'rate-2'."""
        return str(self.concurrency) if self.rate is None else f"rate-{self.rate:g}"

    def key(self, repeat: int = 0, repeated: bool = False) -> str:
        """A level's stack files and report key: the slug, '-rN' when levels repeat."""
        return self.slug + (f"-r{repeat}" if repeated else "")


def slug_of(text: str) -> str:
    """A level as a user names it -> its slug: '8', 'c=8', 'concurrency 8', 'level-8' ->
    '8'; 'rate-2', '2/s', 'rate 2/s' -> 'rate-2' (any case). Not checked against a sweep."""
    key = text.strip().lower()
    for prefix in ("level-", "concurrency=", "concurrency ", "c="):
        key = key.removeprefix(prefix).strip()
    if key.endswith("/s"):
        key = "rate-" + key.removeprefix("rate").strip().removesuffix("/s").strip()
    return key
