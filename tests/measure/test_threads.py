"""Thread names and roles, as a table of waits shows them."""

from __future__ import annotations

import os
import threading

from perfkit.measure.threads import (
    ENGINE_HTTP,
    NATIVE,
    OTHER,
    PERFKIT,
    ThreadBook,
    name_native,
    role_of,
    task_comms,
    thread_stats,
)


def test_roles_by_name_and_kind() -> None:
    assert role_of("MainThread", True, True, ENGINE_HTTP) == ENGINE_HTTP
    assert role_of("perfkit-tail-probe", True, False, ENGINE_HTTP) == PERFKIT
    assert role_of("pk-bpftrace-rd", False, False, ENGINE_HTTP) == PERFKIT
    assert role_of("flusher", True, False, ENGINE_HTTP) == OTHER
    assert role_of("python3", False, False, ENGINE_HTTP) == NATIVE


def test_the_book_names_this_process_threads_and_keeps_the_kernel_name() -> None:
    ready, done = threading.Event(), threading.Event()

    def worker() -> None:
        name_native("pk-test-worker")
        ready.set()
        done.wait(5)

    t = threading.Thread(target=worker, name="perfkit-test-worker")
    t.start()
    ready.wait(5)
    book = ThreadBook(os.getpid(), threading.get_native_id())
    book.look()
    done.set()
    t.join()
    assert t.native_id is not None
    assert book.name(t.native_id) == "perfkit-test-worker"
    assert book.role(t.native_id) == PERFKIT
    if task_comms(os.getpid()):  # Linux: the kernel saw the name too
        assert book.comm[t.native_id] == "pk-test-worker"
    assert book.role(threading.get_native_id()) == "engine+loadgen"
    assert book.name(999_999_999) == "tid 999999999"


def test_thread_stats_has_this_thread() -> None:
    stats = thread_stats(os.getpid())
    if stats:
        user, system, faults = stats[threading.get_native_id()]
        assert user >= 0 and system >= 0 and faults >= 0
