"""Load profiles: by name or path, `extends`, model presets, `--set` overrides.

A profile is TOML -> dict (deep-merged over what it extends) -> overrides ->
model preset expanded -> `schema.Profile`, validated field by field. Every
failure is a `ProfileError` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfkit.config.presets import MODEL_PRESETS
from perfkit.config.schema import Profile
from perfkit.config.typed import FieldError, build, to_dict, unknown_key_message
from perfkit.config.units import cdiv
from perfkit.config.workload import LengthDist
from perfkit.errors import PerfkitError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ProfileError(PerfkitError):
    """A profile (file, name or override) is wrong; the message names where."""


def builtin_dir() -> Path:
    """Profiles ship inside the wheel (perfkit/profiles); a checkout keeps them at the top."""
    package = Path(__file__).resolve().parents[1]  # perfkit/
    packaged = package / "profiles"
    return packaged if packaged.is_dir() else package.parent / "profiles"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.toml"))


def _locate(ref: str, base: Path | None = None) -> Path:
    """A built-in name, or a path (relative to `base` for `extends`)."""
    shown = ref if len(ref) <= 80 else f"{ref[:60]}... ({len(ref)} characters)"
    if not ref.strip() or "\0" in ref or any(len(os.fsencode(p)) > 255 for p in Path(ref).parts):
        raise ProfileError(f"profile {shown!r}: not a profile name or a usable file path")
    candidate = Path(ref)
    if base is not None and not candidate.is_absolute():
        candidate = base / candidate
    if candidate.suffix == ".toml" or "/" in ref or candidate.exists() or candidate.is_symlink():
        if candidate.is_file():
            return candidate
        raise ProfileError(f"profile file {shown!r} {_why_not_a_file(candidate)}")
    named = builtin_dir() / f"{ref}.toml"
    if named.is_file():
        return named
    raise ProfileError(
        f"no built-in profile named {shown!r} (built-in: {', '.join(builtin_names())}); "
        "pass a name or a path to a .toml file"
    )


def _why_not_a_file(path: Path) -> str:
    """What is at `path` instead of a readable profile file."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "is a dangling link" if path.is_symlink() else "does not exist"
    except OSError as err:  # ELOOP, EACCES, ENOTDIR ...
        return f"cannot be opened ({err.strerror})"
    if stat.S_ISDIR(mode):
        return "is a folder; name a .toml file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO, not a file"
    return "is not a regular file"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"profile {str(path)!r}: cannot read it ({err})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(f"profile {str(path)!r}: TOML syntax error: {err}") from None


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; any other value in `over` replaces the base value."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _raw_profile(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's dict merged over everything it `extends` (cycles rejected)."""
    resolved = path.resolve()
    if resolved in seen:
        chain = " -> ".join(str(p.name) for p in (*seen, resolved))
        raise ProfileError(f"profile {str(path)!r}: `extends` forms a cycle ({chain})")
    data = _read_toml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ProfileError(f"profile {str(path)!r}: extends: expected a profile name or path")
    base = _raw_profile(_locate(parent, path.parent), (*seen, resolved))
    base.pop("name", None)
    base.pop("description", None)
    return deep_merge(base, data)


def parse_override(text: str) -> tuple[list[str], Any]:
    """'engine.block_size=32' -> (['engine', 'block_size'], 32). Values are TOML, else strings."""
    key, sep, raw = text.partition("=")
    keys = [k.strip() for k in key.split(".")]
    if not sep or len(keys) < 2 or not all(keys):
        raise ProfileError(
            f"--set {text!r}: expected SECTION.KEY=VALUE, e.g. --set engine.block_size=32"
        )
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return keys, value


def _apply(data: dict[str, Any], keys: list[str], value: Any) -> None:
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[keys[-1]] = value


def _expand_model(data: dict[str, Any], source: str) -> None:
    """Fill the model section from its preset; explicit numbers override the preset."""
    model = data.get("model")
    if model is None:
        model = data["model"] = {"preset": "tiny"}
    if not isinstance(model, dict):
        raise ProfileError(f"{source}: model: expected a table")
    preset = model.get("preset")
    if preset is None:
        return
    if not isinstance(preset, str):
        raise ProfileError(f"{source}: model.preset: expected a preset name (a string), "
                           f"got {preset!r}")
    if preset not in MODEL_PRESETS:
        hint = unknown_key_message(str(preset), list(MODEL_PRESETS)).replace("key", "preset")
        raise ProfileError(f"{source}: model.preset: {hint}")
    data["model"] = {**MODEL_PRESETS[preset], **model}


@dataclass(frozen=True)
class Overrides:
    model: str | None = None  # --model PRESET: replaces the model section
    sets: tuple[str, ...] = ()  # --set SECTION.KEY=VALUE, in order


def load_profile(ref: str, overrides: Overrides = Overrides()) -> Profile:
    """Resolve `ref` (name or path) with overrides into a validated Profile."""
    path = _locate(ref)
    data = _raw_profile(path)
    data.setdefault("name", path.stem)
    if overrides.model is not None:
        data["model"] = {"preset": overrides.model}
    set_paths = []
    for text in overrides.sets:
        keys, value = parse_override(text)
        _apply(data, keys, value)
        set_paths.append(".".join(keys))
    source = f"profile {str(path)!r}"
    _expand_model(data, "--model" if overrides.model else source)
    try:
        profile = build(Profile, data)
    except FieldError as err:
        from_set = any(err.path == p or err.path.startswith(p + ".") or p.startswith(err.path + ".")
                       or err.path.startswith(p + "[") for p in set_paths)
        where = f"--set {err.path}" if from_set else f"{source}: {err.path}"
        raise ProfileError(f"{where}: {err.detail}") from None
    _check_uniform_means(profile, set_paths)
    return profile


def _check_uniform_means(profile: Profile, set_paths: list[str]) -> None:
    """A --set of a uniform length's mean would change nothing (uniform draws from min..max):
    an error naming the keys that do."""
    from perfkit.config.workload import LengthDist

    for path in set_paths:
        if not path.endswith(".mean"):
            continue
        dist: Any = profile
        for key in path.split(".")[:-1]:
            dist = getattr(dist, key, None)
        if isinstance(dist, LengthDist) and dist.kind == "uniform":
            table = path.removesuffix(".mean")
            raise ProfileError(
                f"--set {path}: {table} is uniform between min and max ({dist.min}..{dist.max}),"
                f" so a mean does not apply; set {table}.min and {table}.max, or "
                f"{table}.kind=fixed (or normal, lognormal) with the mean")


def profile_dict(profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = to_dict(profile)
    return out


def profile_sha256(profile: Profile) -> str:
    """Stable digest of the resolved profile: results with different digests don't compare."""
    canonical = json.dumps(profile_dict(profile), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def describe(ref: str) -> str:
    """The one-line description of a profile file (without validating all of it)."""
    return str(_raw_profile(_locate(ref)).get("description", "")).strip()


def pool_blocks(profile: Profile) -> int:
    """Blocks in the KV pool: from engine.kv_memory when set, else engine.num_blocks.

    A block holds block_size tokens of K and V for every layer.
    """
    from perfkit.config.units import parse_size

    eng = profile.engine
    if eng.kv_memory is not None:
        per_block = profile.model.kv_bytes_per_token * eng.block_size
        return max(1, parse_size(eng.kv_memory, "engine.kv_memory") // per_block)
    if eng.num_blocks is not None:
        return eng.num_blocks
    # Neither set: enough for max_num_seqs sequences of max_model_len.
    per_seq = -(-eng.max_model_len // eng.block_size)
    return per_seq * eng.max_num_seqs


def usable_blocks(profile: Profile) -> int:
    """Blocks a request can hold: the pool less vLLM's null block (engine.null_block).

    The KV cache keeps all `pool_blocks` (the null block's place is never written)."""
    return pool_blocks(profile) - int(profile.engine.null_block)


def smallest_request(dist: LengthDist) -> int:
    if dist.kind == "fixed":
        return max(1, round(dist.mean))
    return dist.min


def check_pool(profile: Profile) -> None:
    """A pool that cannot hold the workload's smallest request rejects every request: a
    sweep or a server on it measures nothing. (The fragmentation replays take any pool.)"""
    eng, work = profile.engine, profile.workload
    tokens = min(smallest_request(work.prompt_len) + smallest_request(work.output_len),
                 eng.max_model_len)
    need, have = cdiv(tokens, eng.block_size), usable_blocks(profile)
    if have < need:
        key = "engine.kv_memory" if eng.kv_memory is not None else "engine.num_blocks"
        null = " (one more than it needs: engine.null_block)" if eng.null_block else ""
        raise PerfkitError(
            f"profile {profile.name!r}: {key}: a pool of {have} usable block(s) of "
            f"{eng.block_size} tokens cannot hold the workload's smallest request ({tokens} "
            f"tokens, {need} blocks): every request would be rejected; give at least "
            f"{need + int(eng.null_block)} blocks{null}")
