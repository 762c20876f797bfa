"""Kernels compiled with numba, or run as plain Python: the fragmentation replays'
(fragmentation/paged_kernel.py, contiguous_kernel.py) and the CPU paged decode
(engine/layers/cpu_decode.py). Only the standard library here, so every floor may use it.

A kernel module (`paged_kernel`, `contiguous_kernel`) is plain Python over int64 arrays
and scalars: no objects, no dicts, so numba compiles it whole (`nopython`). Its functions
are marked `@kernel`; imported normally they are compiled (numba.njit, cache=True: the
machine code is written beside the source once and loaded from there after, so only the
first run pays the compile). `pure(module)` loads a second copy of the same source with
`@kernel` a no-op: the pure-Python reference the compiled path is tested against, and
the fallback when numba is missing or PERFKIT_NO_JIT=1 (`--no-jit`).

The kernels' functions are untyped (numba types them from the arrays when it compiles
them; plain Python runs them on lists): they are reached only through the typed wrappers
in `paged` and `contiguous`, which build the arrays and read the results.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A")
NO_JIT_ENV = "PERFKIT_NO_JIT"
PURE_SUFFIX = "_pure"  # module name suffix of the plain-Python copies


def jit_disabled() -> bool:
    return os.environ.get(NO_JIT_ENV, "").strip() not in ("", "0")


def numba_missing() -> str | None:
    """Why numba cannot be used here (a one-line note), else None."""
    if importlib.util.find_spec("numba") is None:
        return "numba is not installed: the replays run as plain Python (slower)"
    return None


def kernel(fn: F) -> F:
    """Compile `fn` with numba unless its module is a pure copy, JIT is off or numba is
    missing; then `fn` itself runs. Every kernel function but the entry point (`run`) is
    inlined into its callers: a call between compiled functions costs a reference count
    on every array it passes, which per step outweighs the step's own work (inlined
    calls still count references on their copies: see `unowned`)."""
    return kernel_with(entry=fn.__name__ == "run")(fn)


def kernel_with(entry: bool = False, **options: Any) -> Callable[[F], F]:
    """`kernel` for an entry point named otherwise (`entry`: never inlined) and with more
    numba options (fastmath, parallel: engine/layers/cpu_decode.py)."""

    def wrap(fn: F) -> F:
        if fn.__module__.endswith(PURE_SUFFIX) or jit_disabled() or numba_missing():
            return fn
        import numba

        inline: Literal["never", "always"] = "never" if entry else "always"
        # a Dispatcher called like fn (on the arrays the wrappers build)
        return cast(F, numba.njit(fn, cache=True, nogil=True, inline=inline, **options))

    return wrap


def _identity(arr: A) -> A:
    return arr


def unowned(module_name: str) -> Callable[[A], A]:
    """For a kernel module's `run`: the identity as plain Python; compiled, a view of an
    array without its owner (the same data, shape and strides, no meminfo). Every
    inlined kernel call copies its array arguments, and numba counts a reference (an
    atomic add and subtract) per copy: with an owner that was ~40% of a paged replay's
    time, without one the count is a null check. Only for arrays the caller keeps
    alive for the whole call and the kernel never replaces."""
    if module_name.endswith(PURE_SUFFIX) or jit_disabled() or numba_missing():
        return _identity
    return cast(Callable[[A], A], _unowned_intrinsic())


@functools.cache
def _unowned_intrinsic() -> Callable[..., Any]:
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def unowned_view(typingctx: Any, arr: Any) -> Any:
        if not isinstance(arr, types.Array):
            return None

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            view = cgutils.create_struct_proxy(arr)(context, builder, value=args[0])
            view.meminfo = cgutils.get_null_value(view.meminfo.type)
            view.parent = cgutils.get_null_value(view.parent.type)
            return view._getvalue()

        return arr(arr), codegen

    return cast(Callable[..., Any], unowned_view)


def pure(module: ModuleType) -> ModuleType:
    """A plain-Python copy of a kernel module (the same source, nothing compiled)."""
    name = module.__name__ + PURE_SUFFIX
    if name in sys.modules:
        return sys.modules[name]
    path = module.__file__
    assert path is not None
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    sys.modules[name] = copy
    spec.loader.exec_module(copy)
    return copy


def kernel_module(module: ModuleType, jit: bool) -> ModuleType:
    """The compiled module when `jit` and compiling is possible, else its pure copy."""
    if jit and not jit_disabled() and numba_missing() is None:
        return module
    return pure(module)
