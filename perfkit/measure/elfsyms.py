"""Where a running interpreter keeps its GIL: the ELF file with take_gil, its data pages.

CPython's GIL functions (`take_gil`, `drop_gil` in Python/ceval_gil.c) are static: they
are in an ELF file's `.symtab`, not its dynamic symbols. They live in libpython when the
interpreter links it (pyenv's, Debian's python3.x-dev builds) or in the python binary
itself when it is statically linked (Debian's /usr/bin/python3). The file to probe is
the one the running process has mapped (/proc/PID/maps), never a guess from PATH.

The GIL's own state (its mutex and condition variables) is static data of that file
(`_PyRuntime`), so a futex word inside the file's writable mappings is the GIL's (or
another runtime-internal lock), while a `threading.Lock` lives on the heap. The sampled
fallback tells GIL waits from lock waits by that rule (measure/waitstates.py).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

GIL_FUNCTIONS = ("take_gil", "drop_gil")
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11


@dataclass(frozen=True)
class GilImage:
    path: str  # the interpreter's ELF file (libpython, else the executable) as mapped
    # [start, end) of its writable mappings (and the anonymous .bss right after them)
    data_ranges: list[tuple[int, int]] = field(default_factory=list)
    symbols: bool = True  # take_gil and drop_gil are in its symbol table (uprobes can attach)

    def holds(self, address: int) -> bool:
        return any(lo <= address < hi for lo, hi in self.data_ranges)


def elf_symbols(path: str, wanted: tuple[str, ...]) -> set[str]:
    """Which of `wanted` the ELF file defines (.symtab and .dynsym); {} if not ELF64."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # ELF64 only
                return set()
            end = "<" if head[5] == 1 else ">"
            shoff, = struct.unpack_from(end + "Q", head, 0x28)
            shentsize, shnum = struct.unpack_from(end + "HH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            sections = [struct.unpack_from(end + "IIQQQQIIQQ", table, i * shentsize)
                        for i in range(shnum)]
            return _find(f, end, sections, set(wanted))
    except (OSError, struct.error, IndexError):
        return set()


def _find(f: BinaryIO, end: str, sections: list[tuple[int, ...]], wanted: set[str]) -> set[str]:
    found: set[str] = set()
    for sh in sections:
        if sh[1] not in (_SHT_SYMTAB, _SHT_DYNSYM) or sh[9] == 0:
            continue
        strtab = sections[sh[6]]
        f.seek(strtab[4])
        names = f.read(strtab[5])
        f.seek(sh[4])
        data = f.read(sh[5])
        for name_at, *_ in struct.iter_unpack(end + "IBBHQQ", data[:len(data) // 24 * 24]):
            name = names[name_at:names.find(b"\0", name_at)].decode("ascii", "replace")
            if name in wanted:
                found.add(name)
    return found


def _maps(pid: int) -> list[tuple[int, int, str, str]]:
    """(start, end, permissions, path) of each mapping of `pid`; [] without /proc."""
    out = []
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else ""))
    except (OSError, ValueError, IndexError):
        return []
    return out


def _candidates(pid: int, maps: list[tuple[int, int, str, str]]) -> list[str]:
    """libpython first (where the interpreter links it), then the executable."""
    paths = list(dict.fromkeys(p for *_, p in maps if p.startswith("/")))
    libs = [p for p in paths if os.path.basename(p).startswith("libpython")]
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    return libs + [p for p in paths if p == exe]


def _data_ranges(path: str, maps: list[tuple[int, int, str, str]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, (lo, hi, perms, p) in enumerate(maps):
        if p == path and perms.startswith("rw"):
            out.append((lo, hi))
            if i + 1 < len(maps) and maps[i + 1][3] == "" and maps[i + 1][0] == hi:
                out.append((maps[i + 1][0], maps[i + 1][1]))  # .bss past the file's end
    return out


def find_gil(pid: int) -> tuple[GilImage | None, str]:
    """(the interpreter's ELF file and data, "") or (None, why not) for a running process;
    `symbols` False (with the reason) when no mapped file has take_gil and drop_gil."""
    maps = _maps(pid)
    if not maps:
        return None, f"cannot read /proc/{pid}/maps"
    candidates = _candidates(pid, maps)
    for path in candidates:
        if elf_symbols(path, GIL_FUNCTIONS) == set(GIL_FUNCTIONS):
            return GilImage(path, _data_ranges(path, maps)), ""
    shown = ", ".join(candidates) or "no libpython or executable mapped"
    why = (f"no take_gil/drop_gil symbols in the interpreter's files ({shown}): a stripped "
           "build, or not CPython")
    pythons = [p for p in candidates if os.path.basename(p).startswith(("libpython", "python"))]
    if not pythons or not _data_ranges(pythons[0], maps):
        return None, why
    candidates = pythons
    return GilImage(candidates[0], _data_ranges(candidates[0], maps), symbols=False), why
