"""The interpreter's GIL: its ELF file and data, found from the running process's maps."""

from __future__ import annotations

import os
import sys

import pytest

from perfkit.measure.elfsyms import GIL_FUNCTIONS, elf_symbols, find_gil

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


@linux
def test_this_interpreter_has_the_gil_functions_and_data() -> None:
    gil, why = find_gil(os.getpid())
    assert gil is not None, why
    assert os.path.basename(gil.path).startswith(("libpython", "python"))
    if gil.symbols:
        assert elf_symbols(gil.path, GIL_FUNCTIONS) == set(GIL_FUNCTIONS)
    assert gil.data_ranges and all(lo < hi for lo, hi in gil.data_ranges)
    # a heap object (a lock's futex word lives there) is not the GIL's data
    assert not gil.holds(id(object()))


def test_a_file_that_is_not_elf_has_no_symbols(tmp_path) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"not an ELF file at all" * 10)
    assert elf_symbols(str(path), GIL_FUNCTIONS) == set()
    assert elf_symbols(str(tmp_path / "missing"), GIL_FUNCTIONS) == set()


@linux
def test_a_process_that_is_not_python_has_no_gil() -> None:
    import subprocess

    child = subprocess.Popen(["sleep", "5"])
    try:
        gil, why = find_gil(child.pid)
        assert gil is None and "take_gil" in why
    finally:
        child.kill()
        child.wait()
    assert find_gil(2**22 + 12345)[1].startswith("cannot read /proc/")
