"""Kernels compiled with numba, or run as plain Python: the replays' (replay/paged_*.py,
fragmentation/contiguous_kernel.py, both over replay/arrivals_kernel.py) and the CPU paged
decode (engine/layers/cpu_decode.py). Only the standard library here, so every floor may
use it.

A kernel module is plain Python over int64 arrays and scalars: no objects, no dicts, so
numba compiles it whole (`nopython`). Its functions are marked `@kernel`; imported
normally they are compiled (numba.njit: the machine code is written beside the source
once and loaded from there after, so only the first run pays the compile). `pure(module)`
loads a second copy of the same source with `@kernel` a no-op, and the kernels it calls
from other kernel modules pure copies too: the pure-Python reference the compiled path
is tested against, and the fallback when numba is missing or PERFKIT_NO_JIT=1
(`--no-jit`).

A kernel may span several files: every function but the entry point is inlined into its
callers, so the entry's machine code holds them all. numba's cache checks only the
source file of the function it caches, so an entry point's cache is stamped here with
every kernel file it reaches (`kernel_files`) and jit.py: a change in any of them
recompiles it.

The kernels' functions are untyped (numba types them from the arrays when it compiles
them; plain Python runs them on lists): they are reached only through the typed wrappers
(replay/paged.py, fragmentation/contiguous.py), which build the arrays and read the
results.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A")
NO_JIT_ENV = "PERFKIT_NO_JIT"
PURE_SUFFIX = "_pure"  # module name suffix of the plain-Python copies
_KERNEL_MODULES: set[str] = set()  # modules with @kernel functions


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
        _KERNEL_MODULES.add(fn.__module__)
        if fn.__module__.endswith(PURE_SUFFIX) or jit_disabled() or numba_missing():
            return fn
        import numba

        inline: Literal["never", "always"] = "never" if entry else "always"
        # a Dispatcher called like fn (on the arrays the wrappers build)
        compiled = numba.njit(fn, nogil=True, inline=inline, **options)
        if entry:  # inlined functions are compiled into their callers, never alone
            cast(Any, compiled)._cache = _family_cache(fn)
        return cast(F, compiled)

    return wrap


def _kernel_module_of(value: Any) -> str | None:
    """The kernel module a global of a kernel module comes from, if any."""
    name = value.__name__ if isinstance(value, ModuleType) else \
        getattr(getattr(value, "py_func", value), "__module__", None)
    return name if name in _KERNEL_MODULES else None


def _imports(name: str) -> set[str]:
    """The modules of the same package that module `name`'s import statements name."""
    tree = ast.parse(Path(str(sys.modules[name].__file__)).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    top = name.split(".")[0]
    return {m for m in found if m.split(".")[0] == top and m in sys.modules}


def kernel_files(module_name: str) -> list[str]:
    """The source files of a kernel module and of every module it imports from its own
    package (its callees, its constants), following kernel modules further; sorted."""
    seen: set[str] = set()
    todo = [module_name]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(_imports(name)) if name in _KERNEL_MODULES else []
    return sorted(str(sys.modules[name].__file__) for name in seen)


def _family_cache(fn: Callable[..., Any]) -> Any:
    """numba's cache for entry point `fn`, its source stamp widened to every kernel file
    it reaches and this one: an edit of any of them empties the index (numba's own stamp
    is fn's file only, and inlined callees from other files would stay stale)."""
    from numba.core.caching import FunctionCache, IndexDataCacheFile

    cache = FunctionCache(fn)
    files = [*kernel_files(fn.__module__), __file__]
    digest = hashlib.sha256(b"".join(Path(f).read_bytes() for f in files)).hexdigest()
    cache._cache_file = IndexDataCacheFile(
        cache_path=cache._cache_path, filename_base=cache._impl.filename_base,
        source_stamp=(cache._impl.locator.get_source_stamp(), digest))
    return cache


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
    for attr, value in list(vars(copy).items()):  # its kernel imports: pure copies too
        other = _kernel_module_of(value)
        if other is not None and not other.endswith(PURE_SUFFIX):
            twin = pure(sys.modules[other])
            setattr(copy, attr, twin if isinstance(value, ModuleType) else
                    getattr(twin, getattr(value, "py_func", value).__name__))
    return copy


def kernel_module(module: ModuleType, jit: bool) -> ModuleType:
    """The compiled module when `jit` and compiling is possible, else its pure copy."""
    if jit and not jit_disabled() and numba_missing() is None:
        return module
    return pure(module)
