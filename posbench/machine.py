"""Where a record is measured: the machine, its software and the code (:func:`environment`), and the common part
of every new record, stamped with it (:func:`new_record`). Apart from :mod:`posbench.records` because naming
torch's version and threads imports torch, and reading or writing a record (the aggregation, the report) does
not need it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

from posbench import records
from posbench.measuring_code import code_hash


def new_record(kind: str, config: dict, status: str = "ok", reason: str = "") -> dict:
    """The common part of every record; callers add their kind's sections."""
    return {
        "schema_version": records.SCHEMA_VERSION,
        "kind": kind,
        "config": config,
        "config_hash": records.config_hash(config),
        "status": status,
        "reason": reason,
        "environment": environment(),
    }


def environment() -> dict:
    """Where a record was measured: versions, machine, threads, the measuring code (``code_hash``) and,
    for provenance, the commit it was checked out from."""
    import torch

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": os.environ.get("POSBENCH_MACHINE") or platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "packages": {name: _version(name) for name in ("torch", "fvcore", "numpy", "nvidia-ml-py", "posbench")},
        "code_hash": code_hash(),
        "git_commit": git_commit(),
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda
    return env


@cache
def cpu_model() -> str:
    """This CPU as :func:`cpu_name` reads ``/proc/cpuinfo``; the platform's word for it where there is none."""
    try:
        return cpu_name(Path("/proc/cpuinfo").read_text())
    except (OSError, ValueError):
        return platform.processor() or platform.machine()


def cpu_name(cpuinfo: str) -> str:
    """``<model name> (family 25, model 1, AVX2)``: the first processor's model name, family, model and widest
    vector unit in ``cpuinfo``. A VM's model name alone may be only the vendor's brand, the same for five
    generations, and a training trajectory depends on the CPU's arithmetic (AVX-512 or not), so a record names
    both. A ``ValueError`` where the text names no model."""
    fields = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():  # the first processor's block
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        raise ValueError("cpuinfo names no model")
    flags = set(fields.get("flags", "").split())
    vector = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2")) if flag in flags), None)
    details = [f"family {fields['cpu family']}" if "cpu family" in fields else None,
               f"model {fields['model']}" if "model" in fields else None, vector]
    named = ", ".join(detail for detail in details if detail)
    return f"{fields['model name']} ({named})" if named else fields["model name"]


@cache
def git_commit() -> str:
    """The commit of the posbench checkout, ``+dirty`` when it has uncommitted changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return getattr(sys.modules.get(name), "__version__", None)
