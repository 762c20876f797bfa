"""Workers as Ray actors, spread over a Ray cluster's nodes (`pip install 'perfkit[ray]'`).

Ray only places and starts the workers: each actor runs the same `serve_coordinator` as a
worker process here and connects back to the coordinator's listener (this machine's
node IP, a random port, a random key), so records, barriers and clock probes travel the
same way whatever started the worker. Every node needs perfkit and aiohttp importable
(uvloop too, for its event loop); not torch: a worker never imports it.

    --ray local      start a Ray instance inside this process (tests, one machine)
    --ray auto       join the cluster this machine belongs to (`ray start --head` or
                     `ray start --address ...` ran here; or RAY_ADDRESS)
    --ray ADDRESS    join that cluster (host:port of its head, or ray://host:10001)
Workers go round-robin over the cluster's alive nodes, `--workers-per-node` on each (or
`--workers` in all). A node that dies takes its actors: the coordinator loses them at
once (their actor task ends) or after their silence, as it loses any worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from perfkit.errors import PerfkitError
from perfkit.loadgen.auto import WorkerChoice, parse_workers

INSTALL = "pip install 'perfkit[ray]'"


def join_ray(address: str, workers: str | None, per_node: int | None
             ) -> tuple[WorkerChoice, Callable[[], RayLauncher]]:
    """Join (or start) the cluster before the first level, and size the workers: `--workers
    N` in all, or `--workers-per-node M` on each alive node, or auto (the cluster's CPUs)."""
    try:
        import ray
    except ImportError:
        raise PerfkitError(f"--ray needs Ray installed: {INSTALL}") from None
    address = address.strip()
    if not address:
        raise PerfkitError("--ray: expected local, auto, or the cluster's address "
                           "(host:port, or ray://host:10001)")
    if per_node is not None and workers is not None:
        raise PerfkitError("--workers-per-node sets the workers in all (per node x nodes); "
                           "give it or --workers, not both")
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     logging_level=logging.ERROR, configure_logging=False)
        except Exception as err:  # ConnectionError, RuntimeError, ...: one line
            first = str(err).strip().splitlines()
            raise PerfkitError(f"--ray {address}: cannot join the cluster: "
                               f"{first[0] if first else type(err).__name__}") from None
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    cpus = int(ray.cluster_resources().get("CPU", len(nodes)))
    choice = (WorkerChoice(per_node * len(nodes), cpus) if per_node is not None
              else parse_workers(workers, cpus, default=None))
    return choice, lambda: RayLauncher(nodes, per_node, started)


def _actor_class() -> Any:
    import ray

    @ray.remote(num_cpus=1)
    class LoadWorker:
        def serve(self, host: str, port: int, key: bytes, index: int) -> None:
            from perfkit.loadgen.worker import serve_coordinator

            serve_coordinator(host, port, key, index)

    return LoadWorker


class RayLauncher:
    name = "ray"
    start_timeout_s = 120.0  # a cold node imports Ray and aiohttp first
    margin_s = 0.1

    def __init__(self, nodes: list[str], per_node: int | None, started_ray: bool) -> None:
        import ray

        self.ray = ray
        self.started_ray = started_ray  # shut it down at the end: this process started it
        self.nodes = nodes
        self.per_node = per_node
        self.actor_class = _actor_class()
        self.actors: dict[int, Any] = {}
        self.tasks: dict[int, Any] = {}

    def bind_host(self) -> str:
        return "0.0.0.0"

    def connect_host(self) -> str:
        return str(self.ray.util.get_node_ip_address())

    def node_for(self, index: int) -> str:
        """Round-robin over the alive nodes; with --workers-per-node, fill each in turn."""
        if self.per_node:
            return self.nodes[(index // self.per_node) % len(self.nodes)]
        return self.nodes[index % len(self.nodes)]

    def start(self, index: int, port: int, key: bytes) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(self.node_for(index), soft=True)
        actor = self.actor_class.options(scheduling_strategy=strategy,
                                         name=None, max_restarts=0).remote()
        self.actors[index] = actor
        self.tasks[index] = actor.serve.remote(self.connect_host(), port, key, index)

    def exit_reason(self, index: int) -> str | None:
        task = self.tasks.get(index)
        if task is None:
            return None
        done, _ = self.ray.wait([task], timeout=0)
        if not done:
            return None
        try:
            self.ray.get(task)
        except Exception as err:
            first = str(err).strip().splitlines()
            return f"Ray actor ended: {type(err).__name__}" + (f": {first[0][:200]}"
                                                                if first else "")
        return "Ray actor returned"

    def stop(self, index: int) -> None:
        actor = self.actors.pop(index, None)
        self.tasks.pop(index, None)
        if actor is not None:
            self.ray.kill(actor, no_restart=True)

    def close(self) -> None:
        for index in list(self.actors):
            done, _ = self.ray.wait([self.tasks[index]], timeout=2.0)
            if not done:
                self.stop(index)
        self.actors.clear()
        self.tasks.clear()
        if self.started_ray:
            self.ray.shutdown()
