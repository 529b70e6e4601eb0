"""The workflow's SLURM profile against a real single-node SLURM cluster on this machine.

`scripts/slurm-cluster.sh up` installs Debian's SLURM packages if missing and starts the
daemons; the workflow then goes through `snakemake --executor slurm` with
`workflow/profiles/slurm` under a hard `timeout -s KILL` (a status poll that never sees a job
end must fail the test, not hang CI). Needs root on Linux with apt-get, as CI has; skipped where
the packages cannot be installed.

Three workflows: a fixture of jobs that succeed, fail, exceed their memory or ask for a GPU; the
smoke preset; and two training jobs, one of which dies mid-run (cancelled with `scancel`, or its
training process killed on the node), after which `--rerun-incomplete` must finish the run with every
record already written byte-identical.
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"
FIXTURE = Path(__file__).parent / "slurm_fixture"
KILLED_BY_TIMEOUT = 128 + 9
PACKAGES_UNAVAILABLE = 3  # `slurm-cluster.sh up`'s exit status when apt-get cannot install SLURM
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
    """Bring the cluster up for the session; tear it down only if this session started it. Skipped where
    the SLURM packages cannot be installed; any other failure to start is an error."""
    already_up = _cluster("status").returncode == 0
    started = _cluster("up")
    if started.returncode == PACKAGES_UNAVAILABLE:
        pytest.skip(" | ".join(started.stderr.strip().splitlines()))  # apt-get's reason, then the script's
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield
    finally:
        if not already_up:
            stopped = _cluster("down")
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def slurm_snakemake(extra_args, timeout_s):
    """The command line and environment that run snakemake through SLURM with the repo's profile.

    Under `timeout -s KILL timeout_s`: a killed snakemake ends with 137. `--verbose` puts every
    `sbatch` call in the log.
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
    return command, env


def run_workflow_on_slurm(snakefile_dir_or_repo, extra_args, timeout_s):
    """Run the workflow in `snakefile_dir_or_repo` through SLURM; (returncode, log text)."""
    command, env = slurm_snakemake(extra_args, timeout_s)
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
    from posbench.workflow import resolve_devices
    from posbench.workflow_config import validate_config

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


# A training job that dies: cancelled with `scancel`, or its training process killed on the node
# (SIGKILL: no handler runs, as when the node's kernel or an operator ends it). The job of VICTIM is
# caught after its first seed's record is written and while its second seed trains.
FAULTS_CONFIG = FIXTURE / "faults.yaml"
VICTIM = "alibi"
FAULT_STATES = {"scancel": "CANCELLED", "kill -9": "FAILED"}  # what SLURM then reports for the job
VICTIM_WAIT_S = 240
# SLURM's KillWait (30 s by default): from a job's end, SIGTERM, then SIGKILL to what is left.
LEFTOVER_WAIT_S = 30 + 15


def running_training(encoding):
    """(SLURM job id, PID) of the running `python -m posbench train --encoding <encoding>`, or None.

    Found as an operator on the node finds it: the job's processes from `scontrol listpids`, told
    apart by their command line.
    """
    running = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i"], capture_output=True, text=True)
    for job_id in running.stdout.split():
        listing = subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True)
        for line in listing.stdout.splitlines()[1:]:  # under the header: PID JOBID STEPID ...
            pid = int(line.split()[0])
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue  # ended since the listing
            if argv[1:4] == ["-m", "posbench", "train"] and argv[argv.index("--encoding") + 1] == encoding:
                return job_id, pid
    return None


def wait_for_second_seed(workflow, first_record, second_record):
    """(job id, PID) of VICTIM's training once `first_record` is written and `second_record` is not."""
    deadline = time.monotonic() + VICTIM_WAIT_S
    while time.monotonic() < deadline:
        assert workflow.poll() is None, "snakemake ended before the job could be caught"
        assert not second_record.exists(), f"{second_record} was written before the job could be caught"
        found = first_record.exists() and running_training(VICTIM)
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"no running training of {VICTIM} with {first_record} written after {VICTIM_WAIT_S} s")


def record_hashes(results):
    """{path under `results`: sha256} of every file under results/records (records and their items)."""
    return {
        str(path.relative_to(results)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((results / "records").rglob("*"))
        if path.is_file()
    }


def cancel_jobs_in(workdir):
    """Cancel every SLURM job still running in `workdir`, so a failed test leaves none behind."""
    jobs = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True).stdout
    listed = (line.split(maxsplit=1) for line in jobs.splitlines())
    ours = [job_id for job_id, folder in listed if folder == str(workdir)]
    if ours:
        subprocess.run(["scancel", *ours], check=False)


def processes_of_job(job_id):
    """PIDs of the processes on this machine that belong to SLURM job `job_id` (their SLURM_JOB_ID)."""
    marker = f"SLURM_JOB_ID={job_id}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
        except OSError:
            continue  # ended while we looked
    return pids


def leftover_processes(job_id, since):
    """The processes of `job_id` still alive LEFTOVER_WAIT_S after `since` (a time.monotonic())."""
    while processes_of_job(job_id) and time.monotonic() < since + LEFTOVER_WAIT_S:
        time.sleep(1)
    return processes_of_job(job_id)


def error_blocks(log, rule):
    """The text of each `Error in rule <rule>:` block snakemake logged, up to the next unindented line."""
    return re.findall(rf"^Error in rule {rule}:\n((?:[ \t]+.*\n)+)", log, flags=re.MULTILINE)


def make_victim_die(fault, command, env, log_path, victim_records, results):
    """Start the workflow; once VICTIM's job has written its first record and trains its second seed,
    make the job die by `fault`, then wait for snakemake.

    Returns snakemake's exit status, the SLURM job id and PID of the training, the record hashes when
    the job died, and when it died (time.monotonic()).
    """
    with log_path.open("w") as log_file:  # a file, not a pipe that nobody reads while we wait
        workflow = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            job_id, pid = wait_for_second_seed(workflow, *victim_records)
        except BaseException:
            os.killpg(workflow.pid, signal.SIGKILL)  # `timeout` and snakemake: one process group
            raise
        finished_before = record_hashes(results)
        if fault == "scancel":
            subprocess.run(["scancel", job_id], check=True)
        else:
            os.kill(pid, signal.SIGKILL)
        fault_at = time.monotonic()
        returncode = workflow.wait()
    return returncode, job_id, pid, finished_before, fault_at


@pytest.mark.parametrize("fault", FAULT_STATES)
def test_a_training_job_that_dies_fails_the_run_and_a_rerun_keeps_every_finished_record(
    slurm_cluster, tmp_path, fault
):
    import yaml
    from helpers import train_records

    from posbench import records
    from posbench.workflow import batch_manifests, resolve_devices
    from posbench.workflow_config import validate_config

    config = validate_config(yaml.safe_load(FAULTS_CONFIG.read_text()))
    results = tmp_path / config["results"]
    manifests = batch_manifests(config, resolve_devices(config["devices"])[0])
    (victim_manifest,) = [tmp_path / m for m in manifests if f"/{VICTIM}/" in m]
    victim_records = [tmp_path / p for p in train_records(config) if f"/{VICTIM}/" in p]
    # The targets come first: --configfile takes every word after it.
    args = [*manifests, "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
            "--configfile", str(FAULTS_CONFIG)]  # fmt: skip
    first_log = tmp_path / "first_run.log"
    try:
        returncode, job_id, pid, finished_before, fault_at = make_victim_die(
            fault, *slurm_snakemake(args, timeout_s=300), first_log, victim_records, results
        )
        failed_after_s = time.monotonic() - fault_at
        log = first_log.read_text()
        assert returncode == 1, log[-5000:]
        (error,) = error_blocks(log, "train")
        assert str(victim_manifest.relative_to(tmp_path)) in error, error
        assert slurm_job_states(error) == {job_id: FAULT_STATES[fault]}, error
        assert str(victim_records[0].relative_to(results)) in finished_before
        assert not victim_records[1].exists() and not victim_manifest.exists()
        assert not list(results.rglob("*.tmp")), "a temporary file was left behind"
        after_failure = record_hashes(results)
        (victim_log,) = [p for p in (results / "logs").rglob("*.log") if VICTIM in p.parts]
        last_words = victim_log.read_text().splitlines()[-1]  # the training's, before the rerun replaces its log
        assert after_failure.items() >= finished_before.items(), "a record finished before the fault changed"

        returncode, log = run_workflow_on_slurm(REPO, [*args, "--rerun-incomplete"], timeout_s=300)
        (tmp_path / "rerun.log").write_text(log)
        assert returncode == 0, log[-5000:]
    finally:
        cancel_jobs_in(tmp_path)
    after_rerun = record_hashes(results)
    assert after_rerun.items() >= after_failure.items(), "the rerun rewrote a record that had finished"
    assert {records.read_record(tmp_path / p)["status"] for p in train_records(config)} == {"ok"}
    assert all((tmp_path / m).is_file() for m in manifests)
    assert "1 kept from an earlier run" in victim_log.read_text()
    assert not leftover_processes(job_id, since=fault_at), f"job {job_id} left processes running on the node"
    print(
        f"\n{fault}: SLURM job {job_id} ({VICTIM}, training PID {pid}) died while seed 1 trained;"
        f" snakemake exit 1 {failed_after_s:.0f} s later, 'Error in rule train' naming"
        f" {victim_manifest.relative_to(tmp_path)}, SLURM status {FAULT_STATES[fault]};"
        f" --rerun-incomplete exit 0; byte-identical after it (sha256): the {len(finished_before)} record files"
        f" finished before the fault, the {len(after_failure)} there after the failed run"
        f" (of {len(after_rerun)} now). The training's last line before the rerun: {last_words}"
    )
