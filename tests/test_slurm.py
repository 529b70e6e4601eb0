"""The workflow's SLURM profile against a real single-node SLURM cluster on this machine.

`scripts/slurm-cluster.sh up` installs Debian's SLURM packages if missing and starts the
daemons; the workflow then goes through `snakemake --executor slurm` with
`workflow/profiles/slurm` under a hard `timeout -s KILL` (a status poll that never sees a job
end must fail the test, not hang CI). Needs root on Linux with apt-get, as CI has.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"
FIXTURE = Path(__file__).parent / "slurm_fixture"
KILLED_BY_TIMEOUT = 128 + 9
# The plugin's first status check comes after 40 s by default; 5 s keeps the test short.
# MinJobAge=600 on the test cluster stays far above the 3 x 5 s that squeue needs.
FIRST_STATUS_CHECK_S = 5


def _cluster_unavailable_reason():
    if not sys.platform.startswith("linux"):
        return "a SLURM cluster is brought up on Linux only"
    if os.geteuid() != 0:
        return "bringing up SLURM needs root (apt-get and daemons)"
    if shutil.which("apt-get") is None:
        return "bringing up SLURM needs apt-get (Debian/Ubuntu packages)"
    return None


UNAVAILABLE = _cluster_unavailable_reason()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))


def _cluster(command):
    return subprocess.run(
        [str(CLUSTER_SCRIPT), command], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="session")
def slurm_cluster():
    """Bring the cluster up for the session; tear it down only if this session started it."""
    already_up = _cluster("status").returncode == 0
    started = _cluster("up")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield
    finally:
        if not already_up:
            stopped = _cluster("down")
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def run_workflow_on_slurm(snakefile_dir_or_repo, extra_args, timeout_s):
    """Run the workflow in `snakefile_dir_or_repo` through SLURM with the repo's profile.

    Returns (returncode, log text); returncode is 137 if the hard timeout killed snakemake.
    `--verbose` puts every `sbatch` call in the log.
    """
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}"}
    command = [
        "timeout", "-s", "KILL", str(timeout_s),
        sys.executable, "-m", "snakemake",
        "--executor", "slurm",
        "--profile", str(SLURM_PROFILE),
        "--slurm-init-seconds-before-status-checks", str(FIRST_STATUS_CHECK_S),
        "--verbose",
        *extra_args,
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=snakefile_dir_or_repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return done.returncode, done.stdout


def sbatch_calls(log, rule):
    """The `sbatch` command lines the plugin logged for `rule`'s jobs."""
    return re.findall(rf"sbatch call: (sbatch .*--comment rule_{rule}(?:_wildcards_\S*)?\s.*)", log)


def slurm_job_states(log):
    """{SLURM job id: state} for every job the plugin reported failed."""
    found = re.findall(r"SLURM-job '(\d+)' failed, SLURM status is: '(\w+)'", log)
    return dict(found)


def slurm_job_log(log, rule, workdir):
    """(SLURM job id, log text) of `rule`'s single job; the log file is named by the id."""
    logs = list((workdir / ".snakemake" / "slurm_logs" / f"rule_{rule}").glob("*.log"))
    assert len(logs) == 1, f"expected one SLURM log for rule {rule}, found {logs}\n{log}"
    return logs[0].stem, logs[0].read_text()


@pytest.fixture(scope="session")
def fixture_run(slurm_cluster, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("slurm_fixture")
    shutil.copy(FIXTURE / "Snakefile", workdir / "Snakefile")
    returncode, log = run_workflow_on_slurm(
        workdir, ["--keep-going", "--slurm-keep-successful-logs"], timeout_s=300
    )
    (workdir / "snakemake.log").write_text(log)
    assert returncode != KILLED_BY_TIMEOUT, f"snakemake hung and was killed:\n{log}"
    return returncode, log, workdir


def test_good_jobs_produce_their_outputs(fixture_run):
    returncode, log, workdir = fixture_run
    help_text = (workdir / "help.txt").read_text()
    assert help_text.startswith("usage: posbench"), log
    assert int((workdir / "help_lines.txt").read_text()) == len(help_text.splitlines())
    assert returncode == 1, log  # the three failing jobs, and nothing else, fail the run


def test_failing_job_is_reported_failed(fixture_run):
    _, log, workdir = fixture_run
    job_id, _ = slurm_job_log(log, "fails", workdir)
    assert slurm_job_states(log)[job_id] == "FAILED", log
    assert not (workdir / "failed.txt").exists()


def test_over_memory_job_is_killed_and_reported(fixture_run):
    _, log, workdir = fixture_run
    job_id, job_log = slurm_job_log(log, "over_memory", workdir)
    assert slurm_job_states(log)[job_id] in {"OUT_OF_MEMORY", "FAILED"}, log
    assert "exceeded memory limit" in job_log
    assert not (workdir / "over_memory.txt").exists()


def test_resources_reach_sbatch(fixture_run):
    _, log, _ = fixture_run
    (cpu_call,) = sbatch_calls(log, "help")
    assert " --mem 1500 " in cpu_call and " -t 30 " in cpu_call, cpu_call
    assert " --cpus-per-task=1 " in cpu_call and " --ntasks=1 " in cpu_call, cpu_call
    (two_thread_call,) = sbatch_calls(log, "help_lines")
    assert " --cpus-per-task=2 " in two_thread_call, two_thread_call
    (gpu_call,) = sbatch_calls(log, "gpu")
    assert " --gpus=1" in gpu_call and " --ntasks=" not in gpu_call, gpu_call


def test_gpu_request_on_a_cluster_without_gpus_fails_at_submission(fixture_run):
    _, log, workdir = fixture_run
    rejection = "Error in rule gpu:\n    message: SLURM sbatch failed. The error message was "
    assert rejection + "'sbatch: error: Invalid generic resource (gres) specification'" in log
    assert not list((workdir / ".snakemake" / "slurm_logs" / "rule_gpu").glob("*.log"))


@pytest.fixture(scope="session")
def smoke_run(slurm_cluster, tmp_path_factory):
    """The real smoke preset through SLURM, in a work folder of its own."""
    workdir = tmp_path_factory.mktemp("slurm_smoke")
    returncode, log = run_workflow_on_slurm(
        REPO,
        [
            "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(workdir),
            "--configfile", str(REPO / "workflow" / "smoke.yaml"),
        ],
        timeout_s=1500,
    )  # fmt: skip
    (workdir / "snakemake.log").write_text(log)
    assert returncode != KILLED_BY_TIMEOUT, f"snakemake hung and was killed:\n{log[-5000:]}"
    return returncode, log, workdir


def test_smoke_preset_on_slurm_gives_the_cells_of_a_local_run(smoke_run):
    """The cells a local run of the preset writes (tests/test_pipeline.py checks that run against
    the same list) all exist here, all `ok`, and nothing else."""
    import yaml
    from helpers import probe_records, profile_records, train_records

    from posbench import records
    from posbench.workflow import resolve_devices, validate_config

    returncode, log, workdir = smoke_run
    assert returncode == 0, log[-5000:]
    config = validate_config(yaml.safe_load((REPO / "workflow" / "smoke.yaml").read_text()))
    devices, _ = resolve_devices(config["devices"])
    expected = {workdir / p for p in profile_records(config, devices) + train_records(config) + probe_records(config)}
    written = set((workdir / config["results"] / "records").rglob("*.json"))
    assert written == expected
    assert {records.read_record(p)["status"] for p in written} == {"ok"}
    assert (workdir / config["results"] / "tables" / "cost.csv").is_file()
    assert sbatch_calls(log, "profile") and sbatch_calls(log, "train")
