"""SweepOptions: `perfkit sweep`'s flags as given, and the rules between them.

check() runs before the profile loads or any file is looked at; check_profile() takes
the few rules that need the resolved profile. Every broken rule is a PerfkitError (one
line, exit 2), the first one found wins. Past the checks the flags leave as the
library's own types: profile overrides, TargetOptions, TraceOptions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfkit.cli.common import dataset_sets, load_sets, parse_list
from perfkit.errors import PerfkitError
from perfkit.remote.options import TargetOptions, check_remote_flags

if TYPE_CHECKING:
    from perfkit.config.schema import Profile
    from perfkit.traces.session import TraceOptions

FORMATS = ("table", "json", "markdown", "csv")
MAX_STACK_RATE_HZ = 1000.0
MAX_SEARCH_LOAD = 1e6


@dataclass(frozen=True)
class SweepOptions:
    """One field per option of `perfkit sweep`, named as the command's parameter, as
    typed (lists still text: load_sets parses them into profile overrides)."""

    # the profile and its overrides -> profile_sets()
    profile: str  # a built-in name or a .toml path
    model: str | None  # a preset in-process; the served model's name with --target
    set_: list[str] | None  # --set SECTION.KEY=VALUE, repeatable
    concurrency: str | None  # closed-loop levels, "1,2,4"
    rate: str | None  # open-loop levels in requests/s, "2,4,8"
    requests: int | None
    repeats: int | None
    warmup: int | None
    device: str | None  # in-process only: the server picks its own
    seed: int | None
    percentiles: str | None  # "50,99,99.9": each in (0, 100)
    dataset: Path | None
    # how the levels run
    search: bool  # run_search instead of run_sweep: its own levels
    search_max: float | None  # with --search: the highest load tried
    samplers: bool
    contention: bool  # in-process only, one sweep at a time
    lockstep: Path | None  # the socket two sweeps take turns at
    # what is written
    json_path: Path | None
    out: Path | None  # a folder: result.json and every exporter's file
    fmt: str  # stdout: one of FORMATS
    force: bool
    report: bool  # the HTML report, next to the result file
    stacks: bool
    stack_rate: float  # Hz
    native: bool
    # a running server -> target_options()
    target: str | None
    api_key_env: str | None
    timeout: float | None
    scrape_metrics: str | None
    tokenizer: Path | None  # also how --dataset's text becomes tokens
    endpoint: str | None
    server_profile: str | None
    server_profile_dir: Path | None
    workers: str | None
    ray: str | None
    workers_per_node: int | None
    # OpenTelemetry -> trace_options()
    server_traces: str | None
    server_traces_wait: float
    otlp_export: str | None

    def check(self) -> None:
        """The rules between flags, seam by seam: outputs, the target, the run's mode."""
        self._check_outputs()
        self._check_target()
        self._check_modes()

    def _check_outputs(self) -> None:
        if self.fmt not in FORMATS:
            raise PerfkitError(f"--format: expected table, json, markdown or csv, got "
                               f"{self.fmt!r}")
        if self.report and self.result_path() is None:
            raise PerfkitError("--report needs --json FILE or --out DIR (the report goes next "
                               "to the JSON)")
        if not 0 < self.stack_rate <= MAX_STACK_RATE_HZ:
            raise PerfkitError(f"--stack-rate: expected 0 < HZ <= 1000, got "
                               f"{self.stack_rate:g}")
        if self.native and not self.stacks:
            raise PerfkitError("--native adds C/C++ frames to --stacks' samples: add --stacks "
                               "(or drop --native)")

    def _check_target(self) -> None:
        """--target's companions need it; --device refuses it (the server picks its own)."""
        from perfkit.traces.session import check as check_traces

        # with --dataset, --tokenizer reads the dataset's text: no --target needed
        check_remote_flags(self.target, self.api_key_env, self.timeout, self.scrape_metrics,
                           self.device, self.tokenizer if self.dataset is None else None,
                           self.endpoint, self.workers, self.ray, self.workers_per_node)
        if self.target is None and (self.server_profile or self.server_profile_dir):
            raise PerfkitError("--server-profile needs --target URL (a server with a "
                               "profiler)")
        check_traces(self.trace_options(), self.target is not None)

    def _check_modes(self) -> None:
        """--search and --lockstep run levels their own way; --contention is in-process."""
        if self.lockstep is not None:
            clash = [flag for flag, on in (("--search", self.search), ("--stacks", self.stacks))
                     if on]
            if clash:
                raise PerfkitError(f"--lockstep cannot be combined with {', '.join(clash)}: "
                                   "it pairs sweeps level for level (drop one of them)")
        if self.contention:
            self._check_contention()
        if self.search and (self.stacks or not self.samplers):
            raise PerfkitError("--search runs its own levels: without --stacks or "
                               "--no-samplers")
        if self.search_max is not None and not 0 < self.search_max <= MAX_SEARCH_LOAD:
            raise PerfkitError(f"--search-max: expected 0 < LOAD <= 1e6, got "
                               f"{self.search_max:g}")

    def _check_contention(self) -> None:
        """--contention traces perfkit's own engine, on perf_counter's clock."""
        if self.target is not None:
            raise PerfkitError("--contention traces the in-process engine; for a server, run "
                               "`perfkit stacks --pid SERVER_PID --contention` on its machine")
        if self.search or self.lockstep is not None:
            flag = "--search" if self.search else "--lockstep"
            raise PerfkitError(f"--contention cannot be combined with {flag} (drop one of "
                               "them)")

    def check_profile(self, prof: Profile) -> None:
        """The rules that need the resolved profile (its levels may come from the file)."""
        if self.target is None:
            from perfkit.config.profile import check_pool

            check_pool(prof)
        if self.lockstep is not None and prof.sweep.rates and self.target is None:
            raise PerfkitError("--lockstep pairs closed-loop levels only: drop --rate (or "
                               "sweep.rates), or sweep the rates without --lockstep")

    def profile_sets(self) -> list[str]:
        """The command-line values as profile overrides, validated like the file's."""
        sets = load_sets(self.set_, self.concurrency, self.rate, self.requests, self.repeats,
                         self.warmup, self.device, self.seed)
        return sets + dataset_sets(self.dataset, self.tokenizer) + self._percentile_sets()

    def _percentile_sets(self) -> list[str]:
        if self.percentiles is None:
            return []
        qs = parse_list(self.percentiles, float, "--percentiles")
        if any(q >= 100 for q in qs):
            raise PerfkitError(f"--percentiles: each must be in (0, 100), got "
                               f"{self.percentiles!r}")
        return [f"sweep.percentiles={sorted(set(qs))}"]

    def result_path(self) -> Path | None:
        """--json FILE, else result.json in --out DIR; None: no result file."""
        return self.json_path or (self.out / "result.json" if self.out else None)

    def target_options(self) -> TargetOptions | None:
        if self.target is None:
            return None
        return TargetOptions(
            self.target, model=self.model, api_key_env=self.api_key_env,
            timeout_s=self.timeout, scrape_url=self.scrape_metrics, tokenizer=self.tokenizer,
            endpoint=self.endpoint or "completions", server_profile=self.server_profile,
            server_profile_dir=self.server_profile_dir, workers=self.workers,
            workers_per_node=self.workers_per_node, ray=self.ray)

    def trace_options(self) -> TraceOptions:
        from perfkit.traces.session import TraceOptions

        return TraceOptions(self.server_traces, self.otlp_export, self.server_traces_wait)
