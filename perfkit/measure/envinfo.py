"""What a reader must know before trusting a number: versions, devices, profilers.

`collect()` is cheap and goes into every result; `collect(probe_pyspy=True)`
also tries py-spy against a child process (about a second).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from perfkit import __version__


@dataclass
class GpuInfo:
    available: bool
    reason: str = ""  # why not, when unavailable
    name: str = ""
    memory_total_bytes: int = 0
    count: int = 0


@dataclass
class NvmlInfo:
    available: bool
    reason: str = ""
    driver: str = ""


@dataclass
class PySpyInfo:
    installed: bool
    path: str = ""
    version: str = ""
    can_attach: bool | None = None  # None: not probed
    reason: str = ""
    ptrace_scope: int | None = None


@dataclass
class Environment:
    perfkit: str
    python: str
    platform: str
    torch: str
    torch_cuda: str
    cpu_model: str
    cpu_logical_cores: int
    cpu_physical_cores: int
    memory_total_bytes: int
    gpu: GpuInfo
    nvml: NvmlInfo
    pyspy: PySpyInfo
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def device_class(self) -> str:
        """What results may be compared across: 'cuda:<gpu name>' or 'cpu:<cpu model>'."""
        return f"cuda:{self.gpu.name}" if self.gpu.available else f"cpu:{self.cpu_model}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_info() -> GpuInfo:
    try:
        import torch
    except ImportError as err:  # pragma: no cover - torch is a dependency
        return GpuInfo(False, f"torch not importable: {err}")
    if not torch.cuda.is_available():
        built = torch.version.cuda
        why = "torch is a CPU-only build" if built is None else "no CUDA device visible"
        return GpuInfo(False, f"torch.cuda.is_available() is False ({why})")
    props = torch.cuda.get_device_properties(0)
    return GpuInfo(True, "", props.name, int(props.total_memory), torch.cuda.device_count())


def nvml_info() -> NvmlInfo:
    try:
        import pynvml
    except ImportError as err:
        return NvmlInfo(False, f"nvidia-ml-py not installed ({err})")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return NvmlInfo(False, f"nvmlInit failed: {err} (no NVIDIA driver on this machine?)")
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        return NvmlInfo(True, "", driver.decode() if isinstance(driver, bytes) else str(driver))
    finally:
        pynvml.nvmlShutdown()


def pyspy_path() -> str | None:
    """py-spy beside this interpreter (a venv's bin), else on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return local if os.access(local, os.X_OK) else shutil.which("py-spy")


def ptrace_scope() -> int | None:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="utf-8") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def pyspy_info(probe: bool) -> PySpyInfo:
    path = pyspy_path()
    if path is None:
        return PySpyInfo(False, reason="py-spy not found; pip install py-spy")
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        version = out.stdout.strip().removeprefix("py-spy ")
    except (OSError, subprocess.TimeoutExpired) as err:
        return PySpyInfo(False, path, reason=f"py-spy does not run: {err}")
    info = PySpyInfo(True, path, version, ptrace_scope=ptrace_scope())
    if probe:
        info.can_attach, info.reason = _probe_attach(path)
    return info


def _probe_attach(path: str) -> tuple[bool, str]:
    """Dump a child Python process's stack: the same permission a recording needs."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        out = subprocess.run(
            [path, "dump", "--pid", str(child.pid)], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return False, "py-spy dump timed out"
    finally:
        child.kill()
        child.wait()
    if out.returncode == 0:
        return True, ""
    last = (out.stderr or out.stdout).strip().splitlines()
    reason = last[-1] if last else f"exit code {out.returncode}"
    return False, f"{reason} (needs ptrace permission: run as root or add SYS_PTRACE)"


def collect(probe_pyspy: bool = False) -> Environment:
    import torch

    mem = psutil.virtual_memory().total
    return Environment(
        perfkit=__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        torch=torch.__version__,
        torch_cuda=torch.version.cuda or "none (CPU build)",
        cpu_model=cpu_model(),
        cpu_logical_cores=psutil.cpu_count(logical=True) or 1,
        cpu_physical_cores=psutil.cpu_count(logical=False) or 1,
        memory_total_bytes=int(mem),
        gpu=gpu_info(),
        nvml=nvml_info(),
        pyspy=pyspy_info(probe_pyspy),
    )
