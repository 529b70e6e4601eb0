"""`snakemake --lint` has nothing to say and `snakefmt --check` passes on every workflow file."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}


def test_snakemake_lint_is_silent():
    run = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=ROOT, env=ENV, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Lints for" not in run.stdout + run.stderr


def test_snakefmt_check_passes():
    files = ["Snakefile", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflow" / "rules").glob("*.smk"))]
    run = subprocess.run([str(BIN / "snakefmt"), "--check", *files], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
