"""Syscall numbers -> names, for the per-thread syscall summaries (raw_syscalls gives ids).

The kernel's own table is not readable from user space; the C headers (linux-libc-dev)
have it when installed, and the common calls are listed here for the two architectures
perfkit runs on. Unknown numbers read "syscall N".
"""

from __future__ import annotations

import functools
import platform
import re

X86_64 = {
    0: "read", 1: "write", 3: "close", 5: "fstat", 7: "poll", 8: "lseek", 9: "mmap",
    10: "mprotect", 11: "munmap", 12: "brk", 13: "rt_sigaction", 14: "rt_sigprocmask",
    16: "ioctl", 17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev", 21: "access",
    23: "select", 24: "sched_yield", 25: "mremap", 28: "madvise", 32: "dup",
    35: "nanosleep", 39: "getpid", 41: "socket", 42: "connect", 44: "sendto",
    45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 56: "clone", 60: "exit", 61: "wait4",
    72: "fcntl", 79: "getcwd", 89: "readlink", 98: "getrusage", 110: "getppid",
    157: "prctl", 186: "gettid", 202: "futex", 203: "sched_setaffinity",
    204: "sched_getaffinity", 217: "getdents64", 230: "clock_nanosleep", 231: "exit_group",
    232: "epoll_wait", 257: "openat", 262: "newfstatat", 270: "pselect6", 271: "ppoll",
    281: "epoll_pwait", 286: "timerfd_settime", 288: "accept4", 290: "eventfd2",
    293: "pipe2", 324: "membarrier", 332: "statx", 334: "rseq",
    335: "uretprobe",  # Linux >= 6.11: the uretprobe trampoline's (the probes' own cost)
    426: "io_uring_enter", 435: "clone3", 441: "epoll_pwait2", 449: "futex_waitv",
}
AARCH64 = {
    17: "getcwd", 19: "eventfd2", 22: "epoll_pwait", 23: "dup", 25: "fcntl", 29: "ioctl",
    56: "openat", 57: "close", 59: "pipe2", 61: "getdents64", 62: "lseek", 63: "read",
    64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64", 72: "pselect6",
    73: "ppoll", 78: "readlinkat", 79: "newfstatat", 80: "fstat", 93: "exit",
    94: "exit_group", 98: "futex", 101: "nanosleep", 115: "clock_nanosleep",
    122: "sched_setaffinity", 123: "sched_getaffinity", 124: "sched_yield",
    134: "rt_sigaction", 135: "rt_sigprocmask", 165: "getrusage", 167: "prctl",
    172: "getpid", 173: "getppid", 178: "gettid", 198: "socket", 203: "connect",
    206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 214: "brk",
    215: "munmap", 216: "mremap", 220: "clone", 222: "mmap", 226: "mprotect",
    233: "madvise", 242: "accept4", 260: "wait4", 283: "membarrier", 291: "statx",
    293: "rseq", 426: "io_uring_enter", 435: "clone3", 441: "epoll_pwait2",
    449: "futex_waitv",
}
HEADERS = {"x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
           "aarch64": "/usr/include/asm-generic/unistd.h"}
_DEFINE = re.compile(r"#define\s+__NR3?2?_(\w+)\s+(\d+)\s*$")


@functools.cache
def table(machine: str | None = None) -> dict[int, str]:
    """Number -> name on this machine's architecture (the header's, over the built-in)."""
    machine = machine or platform.machine()
    out = dict(X86_64 if machine == "x86_64" else AARCH64 if machine == "aarch64" else {})
    try:
        with open(HEADERS.get(machine, "/nonexistent"), encoding="ascii",
                  errors="replace") as f:
            for line in f:
                m = _DEFINE.match(line)
                if m:
                    out.setdefault(int(m.group(2)), m.group(1))
    except OSError:
        pass
    return out


def name(number: int) -> str:
    return table().get(number, f"syscall {number}")


def number(syscall: str) -> int | None:
    return next((n for n, s in table().items() if s == syscall), None)
