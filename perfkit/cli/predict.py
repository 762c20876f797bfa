"""`perfkit predict`: a calibration + a profile -> every level on the virtual clock."""

from __future__ import annotations

import sys
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
from perfkit.errors import PerfkitError
from perfkit.files import atomic_write_text, check_output

FORMATS = ("table", "json")


@user_errors
def predict(
    calibration: Annotated[Path, typer.Option(
        "--calibration", "-c", help="A calibration file (perfkit calibrate).")],
    profile: ProfileOpt = "default",
    model: ModelOpt = None,
    set_: SetOpt = None,
    concurrency: Annotated[str | None, typer.Option(
        help="Closed-loop levels, e.g. 1,2,4,8 (default: the profile's).")] = None,
    rate: Annotated[str | None, typer.Option(
        help="Open-loop levels in requests/s (default: the profile's).")] = None,
    requests: Annotated[int | None, typer.Option(help="Measured requests per level.")] = None,
    warmup: Annotated[int | None, typer.Option(
        help="Warm-up requests per level, excluded from every metric.")] = None,
    seed: Annotated[int | None, typer.Option(help="Workload seed.")] = None,
    compare: Annotated[Path | None, typer.Option(
        help="A live sweep result (--json) of the same levels: live, predicted, error.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="stdout format: table or json.")
                   ] = "table",
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="Also write the prediction (JSON) here.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --json file.")] = False,
) -> None:
    """Predict TTFT, TPOT, E2E, throughput and goodput per level of a profile's sweep
    without running the model: the engine's own scheduling (no tensors) on a virtual
    clock priced by a calibration's step-time model. Change the profile (--set
    engine.block_size=32, engine.num_blocks=..., --concurrency ...) to ask what it would
    sustain; the model shape must be the calibration's."""
    if fmt not in FORMATS:
        raise PerfkitError(f"--format: expected table or json, got {fmt!r}")
    prof = resolve_profile(profile, model,
                           load_sets(set_, concurrency, rate, requests, None, warmup, None, seed))
    from perfkit.config.profile import check_pool, profile_dict
    from perfkit.predict.calibration import check_against, load_calibration
    from perfkit.predict.levels import predict_profile
    from perfkit.predict.render import prediction_json, prediction_text

    check_pool(prof)
    cal = load_calibration(calibration)
    warnings = check_against(cal, prof, str(calibration))
    live = None
    if compare is not None:
        from perfkit.result.io import load_result

        live = load_result(compare)
    if json_path is not None:
        check_output(json_path, force, "--json")
    for line in warnings:
        err_console.print(f"[yellow]warning[/] {line}", highlight=False)
    prediction = predict_profile(prof, cal, str(calibration), warnings)
    comparison = None
    if live is not None:
        from perfkit.predict.compare import compare as compare_levels

        comparison = compare_levels(prediction, live, str(compare), profile_dict(prof))
    doc = prediction_json(prediction, comparison)
    if json_path is not None:
        atomic_write_text(json_path, doc)
    if fmt == "json":
        sys.stdout.write(doc)
    else:
        console.print(prediction_text(prediction, cal, comparison))
