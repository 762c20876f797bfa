"""--server-profile: the server's own profiler around chosen levels' measured phases.

    POST {root}/start_profile   before the measured phase (after the warm-up)
    POST {root}/stop_profile    after it; the server writes its trace then

`root` is the target URL without its API version (`http://host:8000/v1` -> `http://host:
8000`), where vLLM serves these routes. vLLM 0.x registers them only when started with its
torch profiler configured, `--profiler-config.profiler=torch
--profiler-config.torch_profiler_dir=DIR` (older releases read VLLM_TORCH_PROFILER_DIR);
otherwise, and on servers without a profiler (perfkit serve), they answer 404: the level
runs unprofiled and the outcome says how to enable it. Nothing here raises: every outcome,
good or bad, is a `ServerProfile` with a one-line message.

The start body names the trace (`profile_prefix`, vLLM's option: `perfkit-level-8_...`);
a server that refuses the body (400/422) is asked again without one. With
--server-profile-dir (the server's DIR, when this machine can read it) the trace files
that appeared during the level are listed; the server decides their names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from perfkit.errors import PerfkitError
from perfkit.result.point import LoadPoint, slug_of
from perfkit.result.remote import ServerProfile

ENABLE = ("start vLLM with --profiler-config.profiler=torch "
          "--profiler-config.torch_profiler_dir=DIR (older vLLM: VLLM_TORCH_PROFILER_DIR=DIR)")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 600.0  # the server writes (and gzips) the trace before it answers


def profile_keys(text: str | None, levels: list[LoadPoint]) -> frozenset[str]:
    """--server-profile 8,rate-4 (or c=8, level-8; "all") -> the levels' slugs, checked."""
    if text is None:
        return frozenset()
    slugs = [lv.slug for lv in levels]
    if text.strip() == "all":
        return frozenset(slugs)
    keys = set()
    for part in text.split(","):
        key = slug_of(part)
        if key not in slugs:
            raise PerfkitError(f"--server-profile {text}: no level {part.strip()!r} in this "
                               f"sweep; choose from {', '.join(slugs)} or all")
        keys.add(key)
    return frozenset(keys)


def profile_root(url: str) -> str:
    """The server root of an API base URL: without a trailing /v1."""
    return url.rstrip("/").removesuffix("/v1")


@dataclass
class ProfileCall:
    """One level's start/stop; `start()` then `stop()`, each awaited once."""

    url: str  # the target's API base URL
    slug: str  # the level's stack name ("8", "rate-4"): the trace prefix
    trace_dir: Path | None = None  # --server-profile-dir
    headers: dict[str, str] = field(default_factory=dict)
    started: bool = False
    message: str = ""
    _since: float = 0.0

    @property
    def root(self) -> str:
        return profile_root(self.url)

    async def _post(self, path: str, body: dict[str, str] | None, timeout_s: float
                    ) -> tuple[int, str]:
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, headers=self.headers) as session, \
                session.post(f"{self.root}{path}", json=body) as resp:
            return resp.status, (await resp.text())[:200]

    async def start(self) -> None:
        self._since = time.time()
        try:
            status, text = await self._post("/start_profile", {"profile_prefix": self.prefix},
                                            START_TIMEOUT_S)
            if status in (400, 422):
                status, text = await self._post("/start_profile", None, START_TIMEOUT_S)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            self.message = f"POST {self.root}/start_profile failed ({type(err).__name__}: {err})"
            return
        if status == 404:
            self.message = (f"POST {self.root}/start_profile answered 404: the server's "
                            f"profiler is not enabled; {ENABLE}")
        elif status != 200:
            self.message = f"POST {self.root}/start_profile answered {status}: {text.strip()}"
        self.started = status == 200

    @property
    def prefix(self) -> str:
        return f"perfkit-level-{self.slug}"

    async def stop(self) -> ServerProfile:
        if not self.started:
            return ServerProfile(False, self.message, None, [])
        try:
            status, text = await self._post("/stop_profile", None, STOP_TIMEOUT_S)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            return ServerProfile(False, f"POST {self.root}/stop_profile failed "
                                 f"({type(err).__name__}: {err})", None, [])
        if status != 200:
            return ServerProfile(False, f"POST {self.root}/stop_profile answered {status}: "
                                 f"{text.strip()}", None, [])
        return self._written()

    def _written(self) -> ServerProfile:
        if self.trace_dir is None:
            return ServerProfile(True, f"the server wrote its trace ({self.prefix}*) to its "
                                 "configured profiler directory (its torch_profiler_dir)",
                                 None, [])
        files = sorted(str(p) for p in self.trace_dir.glob("*")
                       if p.is_file() and p.stat().st_mtime >= self._since - 1.0)
        where = str(self.trace_dir)
        if not files:
            return ServerProfile(True, f"the server stopped its profiler but no new file is "
                                 f"in {where} yet (is it the server's torch_profiler_dir?)",
                                 where, [])
        size = sum(Path(f).stat().st_size for f in files)
        return ServerProfile(True, f"the server wrote {len(files)} trace file(s), "
                             f"{_size(size)}, to {where}", where, files)


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else (f"{n / 1024:.0f} KiB" if n < 2**20
                                      else f"{n / 2**20:.1f} MiB")
