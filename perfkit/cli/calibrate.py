"""`perfkit calibrate`: a live in-process run -> the step-time model -> a calibration file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfkit.cli.common import (
    ModelOpt,
    ProfileOpt,
    SetOpt,
    console,
    err_console,
    load_sets,
    resolve_profile,
    user_errors,
)
from perfkit.files import check_output

# A short run by default: the profile's levels at its num_requests each (not sized up for
# the sweep's verdicts), which is already thousands of steps.
SHORT = ["sweep.min_requests_per_client=0", "sweep.min_level_s=0", "sweep.repeats=1"]


@user_errors
def calibrate(
    profile: ProfileOpt = "default",
    model: ModelOpt = None,
    set_: SetOpt = None,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="The calibration file to write.")] = Path("calibration.json"),
    concurrency: Annotated[str | None, typer.Option(
        help="Closed-loop levels to run, e.g. 1,8 (default: the profile's).")] = None,
    rate: Annotated[str | None, typer.Option(
        help="Open-loop levels to run in requests/s (default: the profile's).")] = None,
    requests: Annotated[int | None, typer.Option(
        help="Requests per level (default: the profile's workload.num_requests).")] = None,
    warmup: Annotated[int | None, typer.Option(help="Warm-up requests per level.")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda.")] = None,
    seed: Annotated[int | None, typer.Option(help="Workload seed.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Run the profile's levels live on this device (a short run) and fit the step-time
    model that `perfkit predict` prices steps with: seconds per step as a + b * prefill
    tokens + c * decoding sequences + d * context tokens."""
    from perfkit.config.profile import check_pool

    sets = SHORT + load_sets(set_, concurrency, rate, requests, None, warmup, device, seed)
    prof = resolve_profile(profile, model, sets)
    check_pool(prof)
    check_output(out, force, "--out")
    from perfkit.predict.calibrate import calibrate as run_calibration
    from perfkit.predict.calibration import write_calibration
    from perfkit.predict.render import calibration_text

    def progress(level: object) -> None:
        point = getattr(level, "point", None)
        err_console.print(f"calibrate: {getattr(point, 'label', '?')} done", highlight=False)

    cal = run_calibration(prof, progress)
    write_calibration(cal, out)
    console.print(calibration_text(cal, str(out)))
