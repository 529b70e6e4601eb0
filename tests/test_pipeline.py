"""End to end: the smoke preset through Snakemake, a SIGKILL halfway and the resume the README gives."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from posbench.report.figures import REPORT_FIGURES
from posbench.tables import JUDGED_NAMES
from posbench.workflow import probe_cells, train_cells
from posbench.workflow_config import validate_config

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}


def snakemake(workdir: Path, *args, timeout=900, **popen):
    command = [str(BIN / "snakemake"), "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
               "--cores", "2", *args]
    if popen:
        return subprocess.Popen(command, env=ENV, start_new_session=True, **popen)
    return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("smoke")
    run = snakemake(workdir, "--configfile", str(ROOT / "workflow" / "smoke.yaml"))
    assert run.returncode == 0, run.stderr[-3000:]
    return workdir / "results" / "smoke", run


def test_smoke_sweep_writes_every_record_and_table(smoke):
    results, run = smoke
    preset = yaml.safe_load((ROOT / "workflow" / "smoke.yaml").read_text())
    cost = pd.read_csv(results / "tables" / "cost.csv")
    accuracy = pd.read_csv(results / "tables" / "accuracy.csv")
    n_profile = len(preset["profile"]["encodings"]) * len(preset["profile"]["seq_lens"])
    n_train = len(train_cells(validate_config(preset)))
    (own_rate,) = (results / "records").glob("*/train/cpu/reverse/tiny/rope/steps40/lr0.002/seed0.json")  # train.lr
    assert n_train == 3 and json.loads(own_rate.read_text())["config"]["lr"] == 0.002
    assert len(cost) == n_profile and len(accuracy) == n_train
    assert set(cost["status"]) == {"ok"} and set(accuracy["status"]) == {"ok"}
    assert (cost["flops_analytic"] > 0).all() and (cost["latency_median_ms"] > 0).all()
    assert accuracy["value"].notna().all()
    n_probe = len(probe_cells(validate_config(preset)))
    assert set(pd.read_csv(results / "tables" / "probe.csv")["status"]) == {"ok"}
    meta = json.loads((results / "tables" / "meta.json").read_text())
    assert meta["n_records"] == n_profile + n_train + n_probe and not meta["unreadable"]
    items = pd.read_parquet(results / "tables" / "items.parquet")  # every train cell's evaluation sequences
    assert len(items) == meta["counts"]["items"] and not meta["items_unreadable"]
    assert len(items.groupby(["task", "encoding", "seed"])) == n_train
    assert (results / "report.pdf").stat().st_size > 0


def test_rerun_with_nothing_changed_runs_no_job(smoke):
    results, _ = smoke
    run = snakemake(results.parent.parent, "--configfile", str(ROOT / "workflow" / "smoke.yaml"))
    assert run.returncode == 0 and "Nothing to be done" in run.stdout + run.stderr


def record_bytes(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*.json"))}


def test_sigkill_halfway_then_resume_keeps_finished_records(tmp_path):
    """Records are not Snakemake outputs (a batch job declares only its manifest), so a record on disk
    is finished and stays; the resumed batch keeps it and measures only the cells without one."""
    preset = {"results": "results", "profile": {"encodings": []},
              "train": {"size": "tiny", "seeds": [0, 1, 2], "steps": 30,
                        "tasks": {"reverse": ["sinusoidal", "rope"], "copy": ["alibi"]}}}
    config = tmp_path / "resume.yaml"
    config.write_text(yaml.safe_dump(preset))
    records = tmp_path / "results" / "records"
    sweep = snakemake(tmp_path, "--configfile", str(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while len(record_bytes(records)) < 3 and time.time() < deadline and sweep.poll() is None:
        time.sleep(0.2)
    os.killpg(sweep.pid, signal.SIGKILL)  # Snakemake and the jobs it started, mid-sweep
    sweep.wait()
    done = record_bytes(records)
    assert 3 <= len(done) < 9, "the kill must land halfway through the sweep"
    for path in done:
        json.loads(path.read_text())  # complete, valid JSON: writes are atomic

    assert snakemake(tmp_path, "--configfile", str(config), "--unlock").returncode == 0
    resumed = snakemake(tmp_path, "--configfile", str(config), "--rerun-incomplete")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = record_bytes(records)
    assert len(after) == 9 and not list(records.rglob("*.tmp")), "a partial record is left"
    assert all(after[path] == content for path, content in done.items()), "finished records were rewritten"
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "results" / "batches").rglob("*.json")]
    listed = [entry for manifest in manifests for entry in manifest["records"]]
    assert sorted(tmp_path / entry["record"] for entry in listed) == sorted(after)


def test_snakemake_report_has_every_figure_with_its_caption(smoke):
    results, _ = smoke
    html = results.parent.parent / "report.html"
    run = snakemake(results.parent.parent, "--configfile", str(ROOT / "workflow" / "smoke.yaml"), "--report", str(html))
    assert run.returncode == 0, run.stderr[-3000:]
    text = html.read_text(errors="replace")
    words = " ".join(re.findall(r"[A-Za-z0-9]+", text))
    captions = {spec.name: spec.caption for spec in REPORT_FIGURES}
    captions["report_pdf"] = (ROOT / "workflow" / "report" / "report_pdf.rst").read_text()
    for name, caption in captions.items():
        opening = " ".join(re.findall(r"[A-Za-z0-9]+", caption)[:3])
        assert opening in words, f"caption of {name} missing from the HTML report"
    for figure in (results / "plots").glob("*.png"):
        assert figure.name in text


def test_the_judge_step_runs_without_the_report(smoke):
    """`snakemake results/tables/verdicts.csv` judges the tables (verdicts, claims, advice) and renders no PDF;
    advise then runs on what it wrote. Last in this file: it removes the smoke run's report."""
    results, _ = smoke
    workdir, tables = results.parent.parent, results / "tables"
    judged = [tables / f"{name}.csv" for name in JUDGED_NAMES]  # verdicts, claims, advice, axes
    assert all(path.stat().st_size > 0 for path in judged)
    for path in (results / "report.pdf", *judged):
        path.unlink()
    target = str((tables / "verdicts.csv").relative_to(workdir))  # before --configfile, which takes several
    run = snakemake(workdir, target, "--configfile", str(ROOT / "workflow" / "smoke.yaml"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert all(path.exists() for path in judged) and not (results / "report.pdf").exists()
    assert len(pd.read_csv(tables / "claims.csv")) == 8 and len(pd.read_csv(tables / "advice.csv")) == 8
    advise = subprocess.run([sys.executable, "-m", "posbench", "advise", "--tables", str(tables), "--task", "nlp"],
                            capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert advise.returncode == 0 and advise.stdout.startswith("Situation: task kind nlp"), advise.stderr
