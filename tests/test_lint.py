"""`ruff check` (rules and line length in pyproject.toml) has nothing to say about the package and tests."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "posbench", "tests"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


# Lab notes belong in results/reference/NOTES.md or a commit message, not in code or config: machine names,
# dates, issue and stop numbers, and timings taken on a machine ("47 -> 29 ms on …", "a 2-core …").
LAB_NOTE = re.compile(r"Xeon|EPYC|Zen [0-9]|20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]|issue [0-9]+|stop [0-9]+"
                      r"|\b[0-9][0-9.,]* ?ms on\b|\ba [0-9]+-core\b")
RESULTS_PATH = re.compile(r"results/\S+")  # a results path may name its machine (results/records/<machine>/)
NOTED_SOURCES = ("posbench", "workflow", "config.yaml", "Snakefile")


def lab_notes(text: str) -> list[str]:
    """The lab notes of ``text``, one per line that has any, paths into results/ aside."""
    return [line.strip() for line in text.splitlines() if LAB_NOTE.search(RESULTS_PATH.sub("", line))]


def test_lab_notes_are_found_and_results_paths_are_not_notes():
    assert lab_notes("x = 1  # 47 -> 29 ms on a 2-core Xeon\n# see issue 30\ny = 2\n# 2026-12-02 run\n") == [
        "x = 1  # 47 -> 29 ms on a 2-core Xeon", "# see issue 30", "# 2026-12-02 run"]
    assert lab_notes("timed in 29 ms on one core\nran on a 4-core box\nZen 5, stop 47\n") == [
        "timed in 29 ms on one core", "ran on a 4-core box", "Zen 5, stop 47"]
    assert lab_notes("records: results/records/Xeon-2026-12-02/copy.json\n"
                     "terms on the left; 2 issues; the 2-core count is the machine's\n") == []


def test_code_and_config_hold_no_lab_notes():
    found = []
    for source in NOTED_SOURCES:
        paths = [ROOT / source] if (ROOT / source).is_file() else sorted((ROOT / source).rglob("*"))
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(ROOT).as_posix()
                found += [f"{relative}: {line}" for line in lab_notes(path.read_text(errors="replace"))]
    assert found == [], "lab notes (move them to results/reference/NOTES.md):\n" + "\n".join(found)
