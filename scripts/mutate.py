"""Mutation testing, one module at a time, each against its own tests: ``make mutate``.

mutmut 3 mutates every function of ``source_paths`` and reads its settings from ``[tool.mutmut]`` in
the ``pyproject.toml`` of the folder it runs in, where it keeps its ``mutants/`` copy and its results.
So each module runs in its own scratch folder, ``.mutmut/<module>/``: a copy of ``posbench/`` and
``tests/`` and a ``pyproject.toml`` holding the project's ``[tool.mutmut]`` plus ``only_mutate`` (this
module) and ``pytest_add_cli_args_test_selection`` (its tests, from :data:`MODULES`). The folder is
kept between runs, so mutmut retests only the functions (and tests) that changed since.

    python scripts/mutate.py                       # every module in MODULES
    python scripts/mutate.py posbench/measure.py   # some of them
    python scripts/mutate.py --max-children 1 …    # mutants tested at once (default 2)
    python scripts/mutate.py posbench/measure.py --retest 'posbench.measure.x_latency_stats*'
                                                   # retest these mutants (names or globs) after adding tests

Prints killed / survived / other per module, the wall time, and the surviving mutants' names; see
one with ``cd .mutmut/<module> && mutmut show <name>``. Not part of CI (it takes about an hour).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".mutmut"

# Module -> the tests that judge it: the test files that exercise it (mutmut then runs, for each
# mutant, only the tests that call the mutated function).
ENCODING_TESTS = ["tests/test_encodings.py", "tests/test_positions.py", "tests/test_model.py",
                  "tests/test_attention.py"]
MODULES: dict[str, list[str]] = {
    "posbench/encodings/alibi.py": ENCODING_TESTS,
    "posbench/encodings/t5.py": ENCODING_TESTS,
    "posbench/measure.py": ["tests/test_measure.py"],
    "posbench/encodings/base.py": [*ENCODING_TESTS, "tests/test_generate.py"],
    "posbench/encodings/absolute.py": [*ENCODING_TESTS, "tests/test_generate.py"],
    "posbench/encodings/rope.py": ["tests/test_encodings.py", "tests/test_positions.py", "tests/test_generate.py",
                                   "tests/test_model.py", "tests/test_flops.py"],
    "posbench/encodings/grid.py": ENCODING_TESTS,
    # the learned biases: their formulas (test_encodings), every attention path, and their FLOP terms
    **{f"posbench/encodings/{name}.py": [*ENCODING_TESTS, *(
        f"tests/test_flops.py::test_three_counts_agree[{name}-{config}-{mode}]"
        for config in ("causal-lm-3-heads-L37", "bidirectional-patches-5-heads-L100") for mode in ("infer", "train"))]
       for name in ("fire", "kerple")},
    "posbench/encodings/per_modality.py": [*ENCODING_TESTS, "tests/test_per_modality.py"],
    # (none.py only registers the base class: no function of its own, nothing to mutate; see base.py)
    "posbench/encodings/registry.py": ENCODING_TESTS,
    "posbench/positions.py": ["tests/test_positions.py", "tests/test_encodings.py", "tests/test_attention.py",
                              "tests/test_generate.py"],
    "posbench/attention.py": ["tests/test_attention.py", "tests/test_model.py", "tests/test_encodings.py",
                              "tests/test_generate.py"],
    # the statistics every verdict rests on, and the report's six guidance rows judged by them
    "posbench/evidence.py": ["tests/test_evidence.py"],
    "posbench/statistics.py": ["tests/test_statistics.py", "tests/test_evidence.py", "tests/test_looks.py"],
    "posbench/arms.py": ["tests/test_evidence.py"],
    "posbench/trajectories.py": ["tests/test_looks.py"],
    "posbench/report/verdicts.py": ["tests/test_verdicts.py", *(
        f"tests/test_report.py::test_{name}" for name in (
            "guidance_rows_on_synthetic_tables", "only_the_presets_comparisons_decide_a_row",
            "the_verdict_table_lists_every_comparison_with_results",
            "fewer_than_ten_seeds_make_every_row_inconclusive"))],
    # flops.py: test_three_counts_agree for every encoding (88 cases) is minutes a mutant on a loaded machine;
    # these seven cover each kind of term (none, add, rotation, relative / trainable / built bias)
    "posbench/flops.py": [
        *(f"tests/test_flops.py::test_{name}" for name in (
            "each_encodings_own_work_is_counted_by_every_counter", "stock_counters_miss_attention",
            "attention_grows_with_the_square_of_length", "counters_see_the_dense_kernel_whatever_the_query_blocks",
            "naive_concat_costs_four_times_the_projections_and_fixed_concat_none",
            "analytic_from_config_equals_analytic_from_model", "counts_are_json_ready_with_ratios",
            "counting_a_training_step_leaves_gradients_alone", "bad_arguments_name_the_argument",
            "a_count_that_is_not_quadratic_in_length_is_refused", "decode_flops_of_one_token_against_a_cache_by_hand",
            "four_is_the_shortest_run_length_and_a_fractional_extension_is_refused",
            "attention_of_fewer_queries_than_keys_by_formula",  # a cached step: Lq ≠ Lk
            "a_cached_decode_step_is_counted_by_formula_by_every_counter", "the_causal_half_by_hand_in_both_modes",
            "count_flops_defaults_to_one_sequence_of_1024",
            "a_float64_model_is_counted_on_inputs_of_its_dtype_and_device",
            "elementwise_arithmetic_by_dtype_and_operand",
            "the_gpu_kernels_mask_is_counted_from_its_positional_argument", "counting_prints_and_logs_nothing",
            "fvcore_silences_the_tracers_warnings_only",
            "the_counters_run_sdpa_even_where_a_cuda_model_would_take_flex")),
        *(f"tests/test_flops.py::test_counts_extended_from_short_lengths_equal_the_counts_at_full_length[{case}]"
          for case in ("none-causal-lm-3-heads-L37-infer", "alibi-bidirectional-patches-5-heads-L100-train")),
        *(f"tests/test_flops.py::test_three_counts_agree[{encoding}-{config}-{mode}]"
          for encoding in ("none", "sinusoidal", "rope", "alibi", "t5", "fire", "kerple")
          for config in ("causal-lm-3-heads-L37", "bidirectional-patches-5-heads-L100")
          for mode in ("infer", "train"))],
    # records.py: its own tests and test_profile's record tests that need no profile run; the whole of
    # test_profile and test_batch ran about 45 s a mutant on a loaded machine (hours for 226 mutants), and the
    # four record tests on test_profile's real rope run still take ~27 s a mutant for that run alone
    "posbench/records.py": ["tests/test_records.py", "tests/test_metrics.py", *(
        f"tests/test_profile.py::test_{name}" for name in (
            "the_record_config_is_the_one_the_command_line_always_wrote",
            "a_failing_writer_leaves_the_old_file_and_no_temporary"))],
}


def toml_value(value) -> str:
    """Strings, numbers, booleans and lists of them; JSON spells these the way TOML does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def prepare(module: str, tests: list[str]) -> Path:
    """The module's scratch folder with current sources, tests and its ``[tool.mutmut]``."""
    folder = SCRATCH / module.replace("/", "_").removesuffix(".py")
    folder.mkdir(parents=True, exist_ok=True)
    for tree in ("posbench", "tests"):  # copies keep their mtimes, so mutmut sees only real changes
        shutil.rmtree(folder / tree, ignore_errors=True)
        shutil.copytree(ROOT / tree, folder / tree, ignore=shutil.ignore_patterns("__pycache__"))
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    settings = {**settings, "only_mutate": [module], "pytest_add_cli_args_test_selection": tests}
    lines = ["[tool.mutmut]"] + [f"{key} = {toml_value(value)}" for key, value in settings.items()]
    lines += ["", "[tool.pytest.ini_options]", 'testpaths = ["tests"]']
    (folder / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return folder


def results(folder: Path) -> dict[str, str]:
    """Mutant name -> status (killed, survived, no tests, timeout, …) from ``mutmut results``."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=folder,
                         capture_output=True, text=True, check=True).stdout
    pairs = (line.strip().rsplit(": ", 1) for line in out.splitlines() if ": " in line)
    return {name: status for name, status in pairs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"default: all of {', '.join(MODULES)}")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--retest", nargs="+", default=[], metavar="MUTANT",
                        help="mutant names or globs to test again, whatever their stored result")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"no test selection for {', '.join(unknown)}; known: {', '.join(MODULES)}")
    summary = []
    for module in args.modules or MODULES:
        folder = prepare(module, MODULES[module])
        began = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children),
                              *args.retest],
                             cwd=folder, stdout=(folder / "run.log").open("w"), stderr=subprocess.STDOUT)
        seconds = time.monotonic() - began
        statuses = results(folder) if run.returncode == 0 else {}
        counts = Counter(statuses.values())
        other = {k: v for k, v in counts.items() if k not in ("killed", "survived")}
        line = (f"{module}: {counts['killed']} killed, {counts['survived']} survived"
                f"{', ' + ', '.join(f'{v} {k}' for k, v in sorted(other.items())) if other else ''}"
                f" ({len(statuses)} mutants, {seconds:.0f} s wall)")
        if run.returncode:
            line = f"{module}: mutmut run failed (exit {run.returncode}), see {folder / 'run.log'}"
        print(line, flush=True)
        for name, status in sorted(statuses.items()):
            if status != "killed":
                print(f"    {status}: {name}", flush=True)
        summary.append(line)
    print("\n".join(["", "summary:", *summary]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
