"""The GPU a process runs its kernels on, as tile reports and searches name it.

A tile collection holds one GPU's timings (its model's tile space says which), so a
measurement names the GPU it ran on, and a search the GPU it is for. The name is the
CUDA runtime's (what torch.cuda.get_device_name returns, "NVIDIA H100 80GB HBM3"), the
compute capability "MAJOR.MINOR"."""
import threading
from typing import Optional, Tuple

_lock = threading.Lock()
_found: Optional[Tuple[str, str]] = None


def running_gpu() -> Tuple[str, str]:
    """(name, compute capability) of this process's current CUDA device when PyTorch is
    imported and sees one, else ("", ""): asked once per process (a process tuning kernels
    has its device; one without torch names no GPU and gets its collection's)."""
    global _found
    with _lock:
        if _found is None:
            _found = _ask_torch()
        return _found


def _ask_torch() -> Tuple[str, str]:
    import sys
    torch = sys.modules.get("torch")  # never imported here: a process without it names no GPU
    try:
        if torch is None or not torch.cuda.is_available():
            return "", ""
        device = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(device)
        return str(torch.cuda.get_device_name(device)), f"{major}.{minor}"
    except Exception:  # a broken driver is not the pruner's to report: no GPU named
        return "", ""


def same_gpu(a: str, b: str) -> bool:
    """Whether two GPU names are one GPU (either unknown counts as the same)."""
    return not a or not b or a.strip() == b.strip()
