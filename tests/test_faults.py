"""Faults around a measurement: an output that cannot be written is refused before any work, a failed
write (a full disk, an I/O error) keeps the previous file and leaves no temporary one, a signal keeps
every finished record, and the profiler's own log lines stay off the terminal."""

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from posbench import records
from posbench.__main__ import main
from posbench.cli import arguments
from posbench.faults import WriteError
from posbench.profiler import profiling

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ["train", "--task", "copy", "--encoding", "alibi", "--train-length", "3", "--log-every", "1000"]


def leftovers(folder: Path) -> list[Path]:
    """Temporary files an atomic write or a probe left under ``folder``."""
    return [path for path in folder.rglob("*") if path.name.endswith(".tmp")]


def never(*args, **kwargs):
    raise AssertionError("the command started its work before refusing its output")


@pytest.fixture
def blocked(tmp_path) -> Path:
    """A path below a regular file: no folder can be made there."""
    (tmp_path / "a-file").write_text("in the way\n")
    return tmp_path / "a-file" / "below"


# work each command must not start when its output is refused: (module, attribute)
WORK = {
    "train": ("posbench.cli.train", "train"),
    "profile": ("posbench.cli.profile", "profile_by_length"),
    "probe": ("posbench.cli.probe", "probe"),
    "bench": ("posbench.bench.suite", "run_bench"),
    "aggregate": ("posbench.aggregate", "aggregate"),
    "judge": ("posbench.verdicts", "write"),
    "report": ("posbench.report", "build_report"),
    "tune": ("posbench.cli.tune", "tune_one"),
    "project": ("posbench.projection_check", "write"),
    "preflight": ("posbench.profile", "preflight"),
}
PROFILE = ["profile", "--encoding", "rope", "--size", "tiny", "--seq-len", "64"]
PROBE = ["probe", "--encoding", "sinusoidal", "--d-model", "8"]
# (command, the flag refused, its arguments, the path named); {bad} lies below a file, {tmp} is writable
REFUSALS = [
    ("train", "--out", [*TRAIN, "--seed", "0", "1", "--out", "{bad}/seed{{seed}}.json"], "{bad}/seed0.json"),
    ("train", "--manifest", [*TRAIN, "--out", "{tmp}/seed0.json", "--manifest", "{bad}/batch.json"],
     "{bad}/batch.json"),
    ("profile", "--out", [*PROFILE, "--out", "{bad}/x.json"], "{bad}/x.json"),
    ("profile", "--manifest", [*PROFILE, "--out", "{tmp}/x.json", "--manifest", "{bad}/batch.json"],
     "{bad}/batch.json"),
    ("probe", "--out", [*PROBE, "--out", "{bad}/x.json"], "{bad}/x.json"),
    ("bench", "--out", ["bench", "--parts", "paths", "--quick", "--out", "{bad}"], "{bad}"),
    ("aggregate", "--out", ["aggregate", "--records", "{tmp}/records", "--out", "{bad}"], "{bad}"),
    ("report", "--out", ["report", "--tables", "{tmp}", "--out", "{bad}/report.pdf"], "{bad}/report.pdf"),
    ("report", "--plots", ["report", "--tables", "{tmp}", "--out", "{tmp}/report.pdf", "--plots", "{bad}"], "{bad}"),
    ("tune", "--out", ["tune", "--comparison", "scan-rope", "--out", "{bad}"], "{bad}"),
    ("tune", "--lr-table", ["tune", "--comparison", "scan-rope", "--out", "{tmp}", "--lr-table", "{bad}/lr.csv"],
     "{bad}/lr.csv"),
    ("project", "--out", ["project", "--check", "{tmp}", "--out", "{bad}"], "{bad}"),
    ("preflight", "--out", ["preflight", "--device", "cpu", "--out", "{bad}/cpu.json"], "{bad}/cpu.json"),
]


@pytest.mark.parametrize("command, flag, argv, named", REFUSALS, ids=[f"{c[0]} {c[1]}" for c in REFUSALS])
def test_an_output_below_a_file_is_refused_in_one_line_before_any_work(command, flag, argv, named, blocked, tmp_path,
                                                                        capsys, monkeypatch):
    module, attribute = WORK[command]
    monkeypatch.setattr(f"{module}.{attribute}", never)
    monkeypatch.setattr(arguments, "without_rows", lambda folder, command: False)
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "r.json").write_text("{}")
    assert main([part.format(bad=blocked, tmp=tmp_path) for part in argv]) == 1
    assert capsys.readouterr().err == (f"posbench {command}: error: argument {flag}: cannot write "
                                       f"{named.format(bad=blocked)}: {blocked.parent} is a file, not a folder; "
                                       "nothing done\n")
    assert blocked.parent.read_text() == "in the way\n" and not leftovers(tmp_path)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, a folder no one can create files in")
def test_judge_refuses_a_tables_folder_it_cannot_write_into(capsys, monkeypatch):
    """``judge`` writes beside its input tables; a folder that takes no file is refused before any judging."""
    monkeypatch.setattr("posbench.judge.write", never)
    monkeypatch.setattr(arguments, "without_rows", lambda folder, command: False)
    assert main(["judge", "--tables", "/proc/self"]) == 1
    assert capsys.readouterr().err == ("posbench judge: error: argument --tables: cannot write /proc/self: "
                                       "No such file or directory; nothing done\n")


def test_an_output_path_that_is_a_folder_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("posbench.cli.profile.profile_by_length", never)
    (tmp_path / "x.json").mkdir()
    assert main([*PROFILE, "--out", str(tmp_path / "x.json")]) == 1
    assert f"cannot write {tmp_path / 'x.json'}: it is a folder" in capsys.readouterr().err


def test_the_probe_creates_the_folder_and_leaves_no_file(tmp_path):
    """What is checked is what a write needs: the folders are made, the probe's file is gone again."""
    assert not arguments.unwritable("train", "--out", tmp_path / "a" / "b" / "x.json")
    assert (tmp_path / "a" / "b").is_dir() and not list((tmp_path / "a" / "b").iterdir())


# --- a failed write keeps the previous file and leaves no temporary one -------------------------------------


def disk_fault(monkeypatch, where: str, code: int) -> None:
    """Make the atomic writer's step ``where`` fail as a full disk (ENOSPC) or an I/O error (EIO) does."""
    fault = OSError(code, os.strerror(code))

    def fail(*args, **kwargs):
        raise fault

    target = {"fsync": "posbench.records.os.fsync", "replace": "posbench.records.os.replace",
              "mkstemp": "posbench.records.tempfile.mkstemp"}[where]
    monkeypatch.setattr(target, fail)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("where", ["write", "fsync", "replace", "mkstemp"])
def test_a_failed_write_keeps_the_previous_file_and_no_temporary_one(tmp_path, monkeypatch, where, code):
    path = tmp_path / "cost.csv"
    path.write_bytes(b"previous table\n")

    def write(file):
        file.write(b"half of the new ta")
        if where == "write":  # the disk fills while the file is written
            raise OSError(code, os.strerror(code))
        file.write(b"ble\n")

    if where != "write":
        disk_fault(monkeypatch, where, code)
    with pytest.raises(WriteError) as caught:
        records.write_atomically(path, write)
    assert str(caught.value) == f"cannot write {path}: {os.strerror(code)}; the file there is unchanged"
    assert caught.value.errno == code and "\n" not in str(caught.value)
    assert path.read_bytes() == b"previous table\n" and not leftovers(tmp_path)
    monkeypatch.undo()
    records.write_atomically(path, write if where != "write" else lambda file: file.write(b"new table\n"))
    assert path.read_bytes() in (b"half of the new table\n", b"new table\n") and not leftovers(tmp_path)


def test_a_record_whose_write_fails_is_refused_as_a_write_error(tmp_path, monkeypatch):
    """The record writer (items first, then the JSON) goes through the same writer: nothing half-written."""
    disk_fault(monkeypatch, "fsync", errno.ENOSPC)
    with pytest.raises(WriteError, match="No space left on device"):
        records.write_json(tmp_path / "r.json", {"kind": "batch"})
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("full_at", ["seed1.json", "batch.json"])  # a record, the manifest
def test_a_full_disk_stops_a_batch_in_one_line_and_a_rerun_finishes_it(tmp_path, capsys, monkeypatch, full_at):
    """The disk fills as the second seed's record (or the manifest) is written: exit 1, one line naming that
    file, the records before it whole; with space back, the rerun keeps them byte for byte and writes the rest."""
    real_replace = os.replace

    def replace(source, target):
        if Path(target).name == full_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(source, target)

    argv = [*TRAIN, "--steps", "2", "--seed", "0", "1", "--out", str(tmp_path / "seed{seed}.json"),
            "--manifest", str(tmp_path / "batch.json")]
    monkeypatch.setattr("posbench.records.os.replace", replace)
    assert main(argv) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line or "Traceback" in line]
    assert errors == [f"posbench train: error: cannot write {tmp_path / full_at}: No space left on device; "
                      "rerun once it can be written, finished files stand"]
    finished = {path.name: path.read_bytes() for path in tmp_path.glob("seed*.json")}
    assert sorted(finished) == (["seed0.json"] if full_at == "seed1.json" else ["seed0.json", "seed1.json"])
    assert not (tmp_path / "batch.json").exists() and not leftovers(tmp_path)
    monkeypatch.undo()
    assert main(argv) == 0
    assert {name: (tmp_path / name).read_bytes() for name in finished} == finished
    actions = [entry["action"] for entry in json.loads((tmp_path / "batch.json").read_text())["records"]]
    assert actions == (["kept", "wrote"] if full_at == "seed1.json" else ["kept", "kept"])


def test_a_report_whose_write_fails_keeps_the_previous_pdf(tmp_path, monkeypatch):
    from posbench.report import build_report

    (tmp_path / "tables").mkdir()
    (tmp_path / "report.pdf").write_bytes(b"the previous report")
    disk_fault(monkeypatch, "fsync", errno.EIO)
    with pytest.raises(WriteError, match="Input/output error; the file there is unchanged"):
        build_report(tmp_path / "tables", tmp_path / "report.pdf")
    assert (tmp_path / "report.pdf").read_bytes() == b"the previous report" and not leftovers(tmp_path)


def mount_tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """``folder`` as a tmpfs mounted with ``options``, where this machine lets a test mount one (root);
    the test is skipped otherwise."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB file system."""
    yield from mount_tmpfs(tmp_path / "small", "size=64k")


@pytest.fixture
def read_only(tmp_path):
    """A read-only file system: what stops even root from writing there."""
    yield from mount_tmpfs(tmp_path / "read-only", "size=64k,ro")


def test_an_output_on_a_read_only_file_system_is_refused_before_any_work(read_only, capsys, monkeypatch):
    monkeypatch.setattr("posbench.cli.profile.profile_by_length", never)
    assert main([*PROFILE, "--out", str(read_only / "x.json")]) == 1
    assert capsys.readouterr().err == (f"posbench profile: error: argument --out: cannot write {read_only / 'x.json'}: "
                                       "Read-only file system; nothing done\n")


def test_a_really_full_disk_keeps_the_previous_record(small_disk):
    """On a file system that is really full: the write fails with ENOSPC, the record before is intact."""
    path = small_disk / "seed0.json"
    records.write_json(path, {"kind": "batch", "records": []})
    before = path.read_bytes()
    with pytest.raises(WriteError) as caught:
        records.write_json(path, {"kind": "batch", "records": ["x" * 100] * 1000})  # ~100 KiB > 64 KiB
    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value).startswith(f"cannot write {path}: No space left on device")
    assert path.read_bytes() == before and not leftovers(small_disk)


# --- an interrupted run keeps its finished records ----------------------------------------------------------


def interrupted(argv: list[str], first: Path, signum: int, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m posbench argv``, send ``signum`` to its process group (as a terminal's Ctrl-C or a batch
    system does) once ``first`` exists, and return the finished process."""
    process = subprocess.Popen([sys.executable, "-m", "posbench", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not first.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signum)
    stdout, stderr = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_sigterm_during_a_multi_seed_train_keeps_the_finished_seeds(tmp_path):
    argv = [*TRAIN, "--steps", "50", "--seed", "0", "1", "2", "--out", str(tmp_path / "seed{seed}.json"),
            "--manifest", str(tmp_path / "batch.json")]
    stopped = interrupted(argv, tmp_path / "seed0.json", signal.SIGTERM)
    assert stopped.returncode == 128 + signal.SIGTERM
    assert stopped.stderr.splitlines()[-1] == (f"posbench train: interrupted by SIGTERM: kept 1 of 3 records under "
                                               f"{tmp_path}; rerun to finish the rest")
    assert "Traceback" not in stopped.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["seed0.items.npz", "seed0.json"]
    kept = (tmp_path / "seed0.json").read_bytes()
    assert main(argv) == 0
    assert (tmp_path / "seed0.json").read_bytes() == kept and not leftovers(tmp_path)
    actions = [entry["action"] for entry in json.loads((tmp_path / "batch.json").read_text())["records"]]
    assert actions == ["kept", "wrote", "wrote"]


def test_sigint_during_a_multi_length_profile_keeps_the_finished_length(tmp_path):
    """The lengths of a profile are measured one after another; Ctrl-C in the second keeps the first."""
    cell = ["profile", "--encoding", "rope", "--size", "tiny", "--min-seconds", "0.05", "--min-repeats", "3",
            "--out", str(tmp_path / "L{seq_len}.json")]
    stopped = interrupted([*cell, "--seq-len", "16", "32"], tmp_path / "L16.json", signal.SIGINT)
    assert stopped.returncode == 128 + signal.SIGINT
    assert stopped.stderr.splitlines()[-1] == (f"posbench profile: interrupted by SIGINT: kept 1 of 2 records under "
                                               f"{tmp_path}; rerun to finish the rest")
    assert "Traceback" not in stopped.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["L16.json"]
    kept = (tmp_path / "L16.json").read_bytes()
    assert main([*cell, "--seq-len", "16"]) == 0  # the kept length is not measured again
    assert (tmp_path / "L16.json").read_bytes() == kept and not leftovers(tmp_path)


# --- the profiler's log lines stay off the terminal ---------------------------------------------------------


def test_profiling_drops_kinetos_marks_but_not_other_lines(capfd):
    with profiling([torch.profiler.ProfilerActivity.CPU]) as profiler:
        torch.ones(4).sum()
        os.write(2, b"printed while profiling\n")
    assert any(event.name == "aten::sum" for event in profiler.events())
    err = capfd.readouterr().err
    assert err == "printed while profiling\n"


def test_profile_prints_its_progress_and_result_only(tmp_path):
    """A tiny cell: no ``USDT:`` marks, no library warning, only posbench's own lines."""
    done = subprocess.run([sys.executable, "-m", "posbench", "profile", "--encoding", "rope", "--size", "tiny",
                           "--seq-len", "16", "--min-seconds", "0.05", "--min-repeats", "3",
                           "--out", str(tmp_path / "x.json")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert lines and all(line.startswith(("profile rope", "posbench profile")) for line in lines), lines
