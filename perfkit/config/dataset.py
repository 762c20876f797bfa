"""[workload.dataset]: requests from a file the user brings instead of the generator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from perfkit.config.typed import FieldError


@dataclass
class DatasetConfig:
    path: str = ""  # "" = no dataset: the seeded generator; relative to the working folder
    # auto: by extension (.json sharegpt, .csv burstgpt) or the first JSON line's keys
    format: Literal["auto", "sharegpt", "jsonl", "mooncake", "burstgpt"] = "auto"
    # load: closed loop, or poisson at each rate; timestamps: each rate level replays the
    # file's own arrival pattern, scaled so its mean rate is the level's rate
    replay: Literal["load", "timestamps"] = "load"
    tokenizer: str = ""  # folder with a Hugging Face tokenizer.json, for text records
    think_time_s: float = 0.0  # multi-turn: pause between a reply and the next turn

    def check(self) -> None:
        if self.replay == "timestamps" and not self.path:
            raise FieldError("replay", "timestamps needs a dataset path")
        if not 0 <= self.think_time_s <= 3600:
            raise FieldError("think_time_s", f"must be in [0, 3600] s, got {self.think_time_s}")
