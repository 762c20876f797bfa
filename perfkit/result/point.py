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
