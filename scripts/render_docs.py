"""Every figure and example output of the user documents, generated from the committed reference.

    python scripts/render_docs.py           # rewrite each generated block in place
    python scripts/render_docs.py --check   # write nothing; exit 1 naming each block that is stale

A generated block sits between ``<!-- begin: NAME -->`` and ``<!-- end: NAME -->`` in ``README.md``,
``docs/*.md`` or ``results/reference/README.md``; :data:`BLOCKS` maps each name to the function that writes
it, from the current reference of the default preset (``results/reference/runs.csv``) and the real
commands (``python -m posbench advise …``) run on its tables. Nothing between the markers is written by
hand, so a change to a command's output or to the reference shows up as a stale block
(``tests/test_docs.py``) instead of a document that quietly disagrees with what the command prints.
Rendering twice gives the same files.
"""

from __future__ import annotations

import argparse
import ast
import heapq
import re
import subprocess
import sys
from functools import cache, partial
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs/*.md", "results/reference/README.md", "results/reference/scale/README.md")
RUNS = ROOT / "results/reference/runs.csv"  # one row per measured run of a current reference
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
PRESETS = ("config.yaml", "workflow/smoke.yaml", "workflow/shapes.yaml", "workflow/shapes-lm.yaml",
           "workflow/shapes-algorithmic.yaml", "workflow/shapes-chomsky-a.yaml", "workflow/shapes-chomsky-b.yaml",
           "workflow/full.yaml", "workflow/cluster.yaml", "workflow/scale-micro.yaml", "workflow/scale-tiny.yaml",
           "workflow/scale-small.yaml", "workflow/cluster-scale.yaml")
ESTIMATED_CORES = (4, 8, 16)
# The Python API in a few lines; each bare expression's value is printed beneath it by api_example.
API_EXAMPLE = """\
import torch

import posbench
from posbench import encodings
from posbench.positions import Positions

len(encodings.names())
enc = encodings.build("alibi", d_model=256, n_heads=8, max_len=1024)
enc.attention_bias(Positions.arange(16), Positions.arange(16)).shape  # added to q·k/√d_head
yarn = encodings.build("rope", d_model=256, n_heads=8, max_len=4096,
                       scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024})

cfg = posbench.ModelConfig.from_size("base", encoding="learned_concat", max_len=512)
model = posbench.build_model(cfg)
posbench.count_params(model)
model(torch.randint(256, (1, 64)), Positions.arange(64, offset=100)).shape  # positions 100 … 163
"""
BLOCK = re.compile(r"(<!-- begin: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.DOTALL)


# ----- the reference ---------------------------------------------------------------------------------
@cache
def runs() -> pd.DataFrame:
    """``runs.csv``: preset, reference (folder under results/reference/), command, cores, wall_seconds, …"""
    return pd.read_csv(RUNS)


def reference() -> Path:
    """The current reference of the default preset, relative to the checkout (as the commands print it)."""
    return Path("results/reference") / runs().set_index("preset").loc["default", "reference"]


@cache
def table(name: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / reference() / "tables" / f"{name}.csv")


def deciding() -> pd.DataFrame:
    """The verdicts that decide a guidance row, in the article's order."""
    from posbench import guidance

    frame = table("verdicts")
    frame = frame[frame["decides"].astype(bool)].copy()
    frame["order"] = frame["row"].map({row.key: i for i, row in enumerate(guidance.ROWS)})
    return frame.sort_values(["order", "comparison"])


def interval_level(alpha_one_sided: float) -> str:
    """The two-sided level of a Welch interval whose each side holds ``alpha_one_sided``: ``97.1 %``."""
    return f"{100 * (1 - 2 * alpha_one_sided):.1f} %"


def signed(value: float, digits: int = 3) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


def command_output(args: list[str]) -> str:
    """What ``python -m posbench ARGS`` prints, run from the checkout as a user would."""
    done = subprocess.run([sys.executable, "-m", "posbench", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"python -m posbench {' '.join(args)}: exit {done.returncode}: {last}")
    return done.stdout.rstrip("\n")


def console(args: list[str], keep=lambda line: True, whole: str = "") -> str:
    """A ``console`` block: the command and its output (the lines ``keep`` accepts; a last line says how
    many were left out and where ``whole`` shows them all)."""
    lines = command_output(args).splitlines()
    kept = [line for line in lines if keep(line)]
    tail = [f"… ({len(lines)} lines in all; {whole})"] if len(kept) < len(lines) else []
    return "\n".join(["```console", "$ python -m posbench " + " ".join(args), *kept, *tail, "```"])


# ----- README ----------------------------------------------------------------------------------------
def findings() -> str:
    """One line per guidance row: its verdict and the comparison that decided it, effect and interval."""
    from posbench import guidance, metrics

    head = ["| Guidance row | Claim: verdict | Decided by | Effect: comparator − added [interval] | δ | Seeds "
            "| Trend |", "|---|---|---|---|---|---|---|"]
    lines = []
    for v in deciding().itertuples():
        row = guidance.BY_KEY[v.row]
        where = f"{v.task} at {v.length_ratio:g}×, {v.steps:,} steps"
        lines.append(f"| {row.english} | {row.claim}: **{v.row_shown}** | `{v.comparison}`: {v.comparator_arm} vs "
                     f"{v.add_arm} ({where}) | {signed(v.effect)} [{signed(v.ci_low)}, {signed(v.ci_high)}] "
                     f"{metrics.get(v.metric).label} | {v.margin:g} | {v.n_added}/{v.n_comparator} | {v.trend} |")
    levels = sorted({interval_level(a) for a in deciding()["alpha_look"]})
    note = (f"Effect > 0: the comparator is better; Welch intervals at {' / '.join(levels)}; × the training "
            f"length. From `{reference() / 'tables/verdicts.csv'}`.")
    return "\n".join([*head, *lines, "", note])


def scale() -> str:
    """The scale of the deciding runs: model, parameters, device, steps, text seen, seeds."""
    from posbench.model import ModelConfig

    accuracy, meta = table("accuracy"), pd.read_json(ROOT / reference() / "tables/meta.json", typ="series")
    decisive = accuracy[accuracy["seed"] >= 100]  # the comparisons' seeds; pilots lie below 100
    sizes = sorted(decisive["size"].unique())
    widths = " or ".join(str(d) for d in sorted(decisive["d_model"].unique()))  # a naive concat's E is narrower
    shapes = ", ".join(f"{s} (d_model {widths}, {c.n_layers} layers, {c.n_heads} heads)"
                       for s, c in ((s, ModelConfig.from_size(s)) for s in sizes))
    seen = decisive["steps"] * decisive["batch_size"] * decisive["train_len"]
    env = next(iter(meta["environment"].values()))
    per_arm = decisive.groupby(["task", "encoding", "train_len", "d_model", "steps"])["seed"].nunique()
    return (f"**Scale.** Model: {shapes}, {decisive['params_total'].min():,}–{decisive['params_total'].max():,} "
            f"parameters. Device: {', '.join(sorted(decisive['device'].unique()))} ({env['cpu']}, "
            f"{env['cpu_count']} cores, torch threads per job: {env['torch_threads']}, torch "
            f"{env['packages']['torch']}). "
            f"Training: {decisive['steps'].min():,}–{decisive['steps'].max():,} steps per deciding arm, "
            f"{seen.min() / 1e6:.1f}–{seen.max() / 1e6:.1f} M tokens seen per model. "
            f"Seeds: {per_arm.min()}–{per_arm.max()} per deciding arm.")


def job_seconds() -> tuple[list[float], list[float]]:
    """Seconds of each job before and after the first look, from the reference's records: a train job is
    one arm's seeds of one look (its records' ``wall_time_s`` summed), a probe job one (embedding,
    encoding, vocabulary, length) over its widths and seeds. Profile jobs claim every core and hold no
    such figure: their time is in the part that does not parallelise (:func:`wall_time`)."""
    from posbench import comparisons

    declared = comparisons.load().in_preset("default")
    per_look = {(arm.task, arm.encoding): c.n_seeds for c in declared for arm in c.arms}
    train = table("accuracy")
    n = train.apply(lambda r: per_look.get((r["task"], r["encoding"]), 1), axis=1)
    train["look"] = (train["seed"] >= 100) * (1 + (train["seed"] - 100) // n)  # 0: pilot seeds, their own jobs
    keys = ["task", "encoding", "size", "lr", "train_len", "d_model", "steps", "look"]
    jobs = train.groupby(keys)["wall_time_s"].sum().reset_index()
    probe = table("probe").drop_duplicates(["embedding", "encoding", "vocab", "seq_len", "d_model", "seed"])
    probes = probe.groupby(["embedding", "encoding", "vocab", "seq_len"])["wall_time_s"].sum()
    first = [*jobs.loc[jobs["look"] <= 1, "wall_time_s"], *probes]
    return first, list(jobs.loc[jobs["look"] == 2, "wall_time_s"])


def schedule(seconds: list[float], cores: int) -> float:
    """Wall time of ``seconds``-long jobs on ``cores`` one-thread slots, longest first, each to the slot
    free first (no shorter than the longest job: the critical path)."""
    slots = [0.0] * cores
    for job in sorted(seconds, reverse=True):
        heapq.heapreplace(slots, slots[0] + job)
    return max(slots)


def clock(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def wall_time() -> str:
    """The measured wall time of ``make run`` and the estimate at more cores from the run's seed-seconds."""
    run = runs().set_index("preset").loc["default"]
    first, second = job_seconds()
    modelled = schedule(first, run["cores"]) + schedule(second, run["cores"])
    fixed = run["wall_seconds"] - modelled  # profile jobs (every core), aggregation, judging, the report, start-up
    rows = [f"| {run['cores']} | **{clock(run['wall_seconds'])}** | measured ({run['date']}, {run['cpu']}) |"]
    rows += [f"| {cores} | ~{clock(schedule(first, cores) + schedule(second, cores) + fixed)} | estimated |"
             for cores in ESTIMATED_CORES]
    return "\n".join([
        "| `CORES` | `make run` wall time | |", "|---|---|---|", *rows, "",
        f"Estimated from the run's {sum(first) + sum(second):,.0f} seed-seconds: its {len(first)} training and "
        f"probe jobs, then the {len(second)} of the second look (which waits for the first), each scheduled "
        f"longest first on N one-thread slots, plus the {clock(fixed)} of the measured run this does not explain "
        f"(profile jobs, which hold every core; aggregation, judging, the report). The longest job "
        f"({clock(max(first))}) is the critical path: no number of cores brings it under "
        f"~{clock(max(first) + max(second, default=0) + fixed)}. A job beside more others may run slower than "
        "beside one, as it did in the measured run: take the estimates as lower bounds."])


SCALE_PARTS = ("micro", "tiny", "small")
SCALE_TABLES = ROOT / "results/reference/scale/tables"  # the scale preset's parts measured so far
SCALE_BENCH = ROOT / "results/reference/bench/train-sizes.csv"  # bench --parts train --train-sizes micro,tiny,small
TUNE_RATES = (3, 5)  # rates a tuned arm trains at: the initial grid, up to two rates more (posbench.tune)


def step_ratio(task: str, size: str) -> float:
    """A training step's median time at ``size`` over tiny's, for ``task`` (mean over the bench's encodings;
    a task the bench did not time takes lm_prose's), from the bench's train part at several sizes."""
    bench = pd.read_csv(SCALE_BENCH)
    median = bench[bench["metric"] == "median"].assign(
        task=lambda f: f["item"].str.split("/").str[0], size=lambda f: f["item"].str.split("@").str[1])
    timed = median[median["task"] == (task if task in set(median["task"]) else "lm_prose")]
    by_size = timed.astype({"value": float}).groupby("size")["value"].mean()
    return float(by_size[size] / by_size["tiny"])


def scale_part_config(size: str) -> dict:
    """The scale preset's part ``size`` as Snakemake reads it (``workflow/scale-<size>.yaml``, its include)."""
    from posbench.workflow_config import validate_config, with_included

    return validate_config(with_included(yaml.safe_load((ROOT / f"workflow/scale-{size}.yaml").read_text())))


def scale_part_seconds(size: str, config: dict) -> dict[str, list[float]]:
    """Estimated seconds of each job of the scale preset's part ``size`` (its ``config``), by kind (tune, train):
    the default reference's measured seconds per seed of each deciding arm at tiny (its records'
    ``wall_time_s``), times the seeds a job trains, times :func:`step_ratio`. A tune job trains both arms at 3
    pilot seeds at each rate (:data:`TUNE_RATES`: low and high), where the part tunes its rates
    (:func:`posbench.workflow.tuned_in_run`); a descriptive lm_prose arm trains 3 seeds at 2,000 steps, costed as
    the matched comparison's adding arm (annealed: a little dearer)."""
    from posbench import comparisons
    from posbench import workflow as pw

    tunes = bool(pw.tuned_in_run(config))
    accuracy = table("accuracy")
    deciding = accuracy[accuracy["seed"] >= 100]
    jobs: dict[str, list[float]] = {"tune low": [], "tune high": [], "train": []}
    for comparison in comparisons.load().in_preset("default"):
        if comparison.withdrawn:
            continue
        ratio = step_ratio(comparison.task, size)
        per_seed = []
        for spec in comparison.arms:
            length, width = spec.resolved("tiny")
            rows = deciding[(deciding["task"] == spec.task) & (deciding["encoding"] == spec.encoding)
                            & (deciding["train_len"] == length) & (deciding["d_model"] == width)]
            per_seed.append(float(rows["wall_time_s"].mean()) * ratio)
            jobs["train"].append(per_seed[-1] * comparison.n_seeds)
        for label, rates in zip(("tune low", "tune high"), TUNE_RATES):
            jobs[label] += [sum(per_seed) * 3 * rates] if tunes else []
    matched = comparisons.load().by_id["prose-naive-concat-matched"]
    prose = deciding[(deciding["task"] == "lm_prose") & (deciding["encoding"] == matched.added)
                     & (deciding["train_len"] == 64)]["wall_time_s"].mean()
    jobs["train"] += [float(prose) * step_ratio("lm_prose", size) * 3] * 5
    return jobs


@cache  # the blocks scale-estimate and scale-measured both read it
def scale_part_estimate(size: str) -> tuple[dict, dict, list[float]]:
    """A scale part's config, its jobs' seed-seconds and its estimated wall time on 2 cores (fewest and most
    tuning rates)."""
    config = scale_part_config(size)
    jobs = scale_part_seconds(size, config)
    return config, jobs, [schedule(jobs[tune], 2) + schedule(jobs["train"], 2) for tune in ("tune low", "tune high")]


def scale_estimate() -> str:
    """The scale preset's parts: estimated wall time on 2 cores, before any of it ran."""
    lines = ["| part | tuning | training (first looks) | wall time on 2 cores |", "|---|---|---|---|"]
    total = [0.0, 0.0]
    for size in SCALE_PARTS:
        config, jobs, walls = scale_part_estimate(size)
        total = [total[0] + walls[0], total[1] + walls[1]]
        tuning = (f"{len(jobs['tune low'])} jobs, {sum(jobs['tune low']) / 3600:.1f}–"
                  f"{sum(jobs['tune high']) / 3600:.1f} seed-h" if jobs["tune low"]
                  else f"none (`{config['train']['lr_table']}`)")
        wall = " – ".join(dict.fromkeys((clock(walls[0]), clock(walls[1]))))  # one figure where tuning is none
        lines.append(f"| `scale-{size}.yaml` | {tuning} | {sum(jobs['train']) / 3600:.1f} seed-h | {wall} |")
    run = runs().set_index("preset").loc["default"]
    return "\n".join([*lines, "", f"In all {clock(total[0])} – {clock(total[1])}, and a second look's seeds where a "
                      "first look is unclear. From the default reference's seconds per seed of each deciding arm "
                      f"({run['cpu']}), times the seeds of each job, times a step's time at the size over tiny's "
                      f"(`{shown(SCALE_BENCH)}`); tuning at 3 to 5 rates a grid; jobs scheduled longest first on two "
                      "one-thread slots, tuning before training."])


def scale_measured() -> str:
    """The scale preset's parts measured so far (``runs.csv``, reference ``scale``) beside their estimate."""
    measured = runs().set_index("configfile")
    lines = ["| part | estimated | measured wall time | measured on |", "|---|---|---|---|"]
    for size in SCALE_PARTS:
        path = f"workflow/scale-{size}.yaml"
        estimate = " – ".join(dict.fromkeys(clock(wall) for wall in scale_part_estimate(size)[2]))
        run = measured.loc[path] if path in measured.index else None
        lines.append(f"| `{path}` | {estimate} | " + ("not run yet | |" if run is None else
                     f"**{clock(run['wall_seconds'])}** | {run['date']}, {run['cpu']} |"))
    return "\n".join([*lines, "", "Measured: `/usr/bin/time` over the part's command, its sittings summed "
                      "(`results/reference/runs.csv`; NOTES.md says what ran beside it)."])


def across_sizes(detail: bool = True) -> str:
    """Each guidance row's verdict at every size the scale reference judged (its ``scale.csv`` beside the
    row verdicts of its ``verdicts.csv``) and its trend in size; with ``detail``, each effect and interval, the
    slope and the share of runs still improving (the scale README), else the verdicts alone (the README)."""
    from posbench import guidance, metrics
    from posbench.report.across_sizes import size_cpus

    verdicts = pd.read_csv(SCALE_TABLES / "verdicts.csv")
    keys = ["row", "comparison", "size"]
    found = pd.read_csv(SCALE_TABLES / "scale.csv").merge(
        verdicts[verdicts["decides"].astype(bool)][[*keys, "row_shown", "alpha_look", "metric"]], on=keys)
    sizes = list(found.sort_values("params_non_embedding")["size"].drop_duplicates())
    params = found.groupby("size")["params_non_embedding"].first()
    lines = [f"| Guidance row · comparison{' · metric (δ)' if detail else ''} | "
             + " | ".join(f"{size} (N {params[size] / 1e3:,.0f} k)" for size in sizes) + " | Across sizes |",
             "|---|" + "---|" * (len(sizes) + 1)]
    for (row, comparison), at in found.groupby(["row", "comparison"], sort=False):
        by_size, first = at.set_index("size"), at.iloc[0]
        words, trend = guidance.BY_KEY[row].english, first.size_trend
        if detail:
            words += f" · `{comparison}` · {metrics.get(first.metric).label} ({first.margin:g})"
            cells = [f"**{v.row_shown}** {signed(v.effect)} [{signed(v.ci_low)}, {signed(v.ci_high)}]"
                     for v in (by_size.loc[size] for size in sizes)]
            trend += f"; slope {signed(first.slope)} [{signed(first.slope_low)}, {signed(first.slope_high)}]"
        else:
            words = f"{words.split(' (')[0]} · `{comparison}`"  # the row's words without their examples
            cells = list(by_size.loc[sizes, "row_shown"])
        lines.append(f"| {words} | {' | '.join(cells)} | {trend} |")
    if not detail:
        return "\n".join(lines)
    runs = found["n_added"] + found["n_comparator"]
    undertrained = (found["undertrained"] * runs).groupby(found["size"]).sum() / runs.groupby(found["size"]).sum()
    machines = size_cpus(found)  # every CPU a size's deciding runs name
    levels = " / ".join(sorted({interval_level(a) for a in found["alpha_look"]}))
    return "\n".join([*lines, "", " ".join([
        f"Effect: comparator − added (> 0: the comparator is better), Welch interval at {levels}.",
        "Across sizes: the first size whose comparison outcome (better by more than δ, not better by δ, unclear)",
        "differs from the smallest size's, else 'gap closing (widening) with size' where the slope's interval",
        "excludes 0, else 'same verdict at every size'; the slope: the effect's least-squares change per decade",
        "of N, with its 95 % t interval (1 degree of freedom with three sizes).",
        "Deciding runs whose loss was still falling at their last checkpoint:",
        ", ".join(f"{size} {100 * undertrained[size]:.0f} %" for size in sizes) + ".",
        "Trained on " + "; ".join(f"{size}: {machines[size]}" for size in sizes) + ".",
        f"From `{shown(SCALE_TABLES / 'scale.csv')}`; each row and size in detail: its report.pdf."])])


def cluster_scale_projection() -> str:
    """Projected GPU-hours of ``workflow/cluster-scale.yaml`` per size (``posbench.projection``, not measured):
    every run its parts train (tuning at 3 rates, the first looks' seeds, the descriptive arms), each on its
    comparison's tokens, decay branches included, at the preset's dtype on its GPU model."""
    from posbench import comparisons, projection, tasks
    from posbench import workflow as pw
    from posbench.workflow_config import validate_config

    config = validate_config(yaml.safe_load((ROOT / "workflow/cluster-scale.yaml").read_text()))
    train, declared = config["train"], comparisons.load()
    rule = declared.budget_rule
    runs = []  # (task, encoding, steps with decay branches, runs)
    for comparison in pw.tuned_comparisons(config, declared=True):
        budgets = rule.budgets(comparison.budget)
        steps = budgets[-1] + rule.decay_fraction * sum(budgets[:-1])
        runs += [(spec.task, spec.encoding, steps, comparison.n_seeds + 3 * TUNE_RATES[0]) for spec in comparison.arms]
    runs += [("lm_prose", encoding, train["steps"], len(train["seeds"])) for encoding in train["tasks"]["lm_prose"]]
    lines = ["| size | non-embedding parameters | runs | GPU-hours at peak | at 0.4 of peak |", "|---|---|---|---|---|"]
    for size in train["sizes"]:
        hours = [0.0, 0.0]
        for task, encoding, steps, count in runs:
            job = tasks.get(task)
            tokens = steps * job.batch_size * job.sequence_length(job.train_length)
            one = projection.project_training(size, encoding, tokens, projection.named_device(config["gpu_model"]),
                                              train["dtype"], task=task)
            hours = [hours[0] + count * one.gpu_hours_at_peak, hours[1] + count * one.gpu_hours]
        count = sum(r[3] for r in runs)
        lines.append(f"| {size} | {non_embedding(size)} | {count} | {hours[0]:.2g} | {hours[1]:.2g} |")
    return "\n".join([*lines, "", f"PROJECTED, not measured: `python -m posbench project --train-tokens` per run "
                      f"({train['dtype']} on {config['gpu_model']}'s datasheet peak), the FLOPs of a training step "
                      "times its steps. A step of these small batches is bound by kernel launches, not arithmetic, "
                      "so a GPU reaches a small share of its peak on them: read the figures as a floor."])


def non_embedding(size: str) -> str:
    from posbench.sizes import non_embedding_params

    count = non_embedding_params(size)
    return f"{count / 1e6:.3g} M" if count >= 1e6 else f"{count / 1e3:.3g} k"


def advise_ranking() -> str:
    """``advise`` for long context, its top-level lines (the rule and the evidence under each encoding are
    in docs/programs.md)."""
    return console(advise_long_args(), keep=lambda line: line and not line[0].isspace()
                   and not line.startswith("Rule:"), whole="docs/programs.md shows the evidence")


# ----- docs ------------------------------------------------------------------------------------------
def advise_long_args() -> list[str]:
    return ["advise", "--tables", str(reference() / "tables"), "--task", "long", "--train-len", "64",
            "--deploy-len", "2048"]


def advise_long() -> str:
    return console(advise_long_args())


def advise_code() -> str:
    return console(["advise", "--tables", str(reference() / "tables"), "--task", "code", "--train-len", "128",
                    "--deploy-len", "256", "--latency-budget-ms", "100", "--device", "cpu"])


def verdict_lines() -> str:
    """The judge step's one-line summary of each deciding comparison (``verdicts.csv``'s ``line``)."""
    return "\n".join(["```text", *deciding()["line"], "```"])


def presets() -> str:
    """Each shipped preset's jobs (posbench.workflow, as Snakemake plans them; a CPU-only machine's
    devices where the preset says ``auto``) and its measured wall time where a reference has one. A preset
    that tunes its rates first counts its tune jobs beside its train jobs (planned at the rates of its config
    until its tables exist: the count is the same)."""
    from posbench import workflow as pw
    from posbench.workflow_config import validate_config, with_included

    measured = runs().set_index("configfile")
    lines = ["| preset | train jobs | probe jobs | profile jobs | measured wall time |", "|---|---|---|---|---|"]
    for path in PRESETS:
        config = validate_config(with_included(yaml.safe_load((ROOT / path).read_text())))
        devices, _ = pw.resolve_devices(config["devices"])
        tuned = len(pw.tuned_comparisons(config)) * len(pw.tuned_in_run(config))
        planned = {**config, "train": {**config["train"], "lr_table": None}} if tuned else config
        manifests = pw.batch_manifests(planned, devices)
        kinds = [m.split("/batches/", 1)[1].split("/")[1] for m in manifests]  # <machine>/<rule>/…
        count = {kind: kinds.count(kind) for kind in ("train", "probe", "profile")}
        if tuned:
            count["train"] = f"{count['train']} (+ {tuned} tune)"
        time = (f"{clock(measured.loc[path, 'wall_seconds'])} on {measured.loc[path, 'cores']} cores "
                f"(`{measured.loc[path, 'reference']}`)" if path in measured.index else "not measured")
        lines.append(f"| `{path}` | {count['train']} | {count['probe']} | {count['profile']} | {time} |")
    return "\n".join(lines)


def schema_type(spec: dict) -> str:
    """``integer``, ``string or null``, ``one of a, b``, ```auto```: what a schema allows, in words."""
    if "const" in spec:
        return f"`{spec['const']}`"
    if "enum" in spec:
        return "one of " + ", ".join(map(str, spec["enum"]))
    kind = spec.get("type", "any")
    return " or ".join(kind) if isinstance(kind, list) else kind


def schema_rows(properties: dict, prefix: str = "") -> list[str]:
    """One row per key of a schema's ``properties``, nested objects' keys after their parent's."""
    rows = []
    for key, spec in properties.items():
        kind = " or ".join(schema_type(option) for option in spec.get("oneOf", [spec]))
        default = f"`{yaml.safe_dump(spec['default'], default_flow_style=True).strip().removesuffix('...').strip()}`" \
            if "default" in spec else ""
        text = " ".join(str(spec.get("description", "")).split()).replace("|", "\\|")
        rows.append(f"| `{prefix}{key}` | {kind} | {default} | {text} |")
        rows += schema_rows(spec.get("properties", {}), f"{prefix}{key}.")
    return rows


def config_reference() -> str:
    """Every key of the workflow's config schema: type, default, description."""
    schema = yaml.safe_load(SCHEMA.read_text())
    return "\n".join(["| key | type | default | meaning |", "|---|---|---|---|", *schema_rows(schema["properties"])])


def api_example() -> str:
    """:data:`API_EXAMPLE` run, each bare expression followed by a comment holding its value."""
    namespace: dict = {}
    values: dict[int, str] = {}  # last line of an expression -> its value
    for statement in ast.parse(API_EXAMPLE).body:
        if isinstance(statement, ast.Expr):
            value = eval(compile(ast.Expression(statement.value), "<api example>", "eval"), namespace)
            values[statement.end_lineno] = f"# -> {value!r}"
        else:
            exec(compile(ast.Module([statement], []), "<api example>", "exec"), namespace)
    lines = [text for number, line in enumerate(API_EXAMPLE.splitlines(), 1)
             for text in (line, values.get(number)) if text is not None]
    return "\n".join(["```python", *lines, "```"])


def encoding_names() -> str:
    """Every registered encoding, as ``posbench.encodings.names()`` lists them."""
    from posbench import encodings

    return ", ".join(f"`{name}`" for name in encodings.names())


def reference_runs() -> str:
    """The measured runs of the current references (``runs.csv``)."""
    lines = ["| preset | reference | command | wall time | measured |", "|---|---|---|---|---|"]
    lines += [f"| {r.preset} | `{r.reference}/` | `{r.command}` | {clock(r.wall_seconds)} | {r.date}, {r.cpu} |"
              for r in runs().itertuples()]
    return "\n".join(lines)


BLOCKS = {
    "findings": findings,
    "scale": scale,
    "wall-time": wall_time,
    "advise-ranking": advise_ranking,
    "advise-long": advise_long,
    "advise-code": advise_code,
    "verdict-lines": verdict_lines,
    "presets": presets,
    "config-reference": config_reference,
    "encoding-names": encoding_names,
    "api-example": api_example,
    "reference-runs": reference_runs,
    "scale-estimate": scale_estimate,
    "scale-measured": scale_measured,
    "across-sizes": across_sizes,
    "across-sizes-verdicts": partial(across_sizes, detail=False),
    "cluster-scale-projection": cluster_scale_projection,
}


# ----- rendering -------------------------------------------------------------------------------------
def shown(path: Path) -> str:
    """``path`` as the checkout names it (whole, outside it)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def documents() -> list[Path]:
    return sorted(path for pattern in DOCUMENTS for path in ROOT.glob(pattern))


def rendered(text: str, source: Path, blocks: dict[str, str]) -> str:
    """``text`` with each block's body replaced by its generated content; an unknown name is an error."""
    def body(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise SystemExit(f"{shown(source)}: unknown block {name!r}; known: {', '.join(BLOCKS)}")
        if name not in blocks:
            blocks[name] = BLOCKS[name]()
        return f"{match[1]}{blocks[name]}\n{match[4]}"

    return BLOCK.sub(body, text)


def renderings(paths: list[Path]):
    """``(path, its text, its text with every block generated now)`` for each of ``paths``; a block named in
    several documents is generated once."""
    blocks: dict[str, str] = {}
    for path in paths:
        text = path.read_text()
        yield path, text, rendered(text, path, blocks)


def stale(paths: list[Path]) -> list[str]:
    """``file: block`` for each generated block whose text differs from what is generated now."""
    found = []
    for path, text, now in renderings(paths):
        old, new = ({m["name"]: m["body"] for m in BLOCK.finditer(t)} for t in (text, now))
        found += [f"{shown(path)}: {name}" for name in old if old[name] != new[name]]
    return found


def render(paths: list[Path]) -> list[Path]:
    """Rewrite each file whose blocks changed; the files written."""
    written = []
    for path, text, now in renderings(paths):
        if now != text:
            partial = path.with_name(path.name + ".partial")
            partial.write_text(now)
            partial.replace(path)  # a reader never sees half a document
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    paths = documents()
    if args.check:
        found = stale(paths)
        for line in found:
            print(f"stale: {line} (run: python scripts/render_docs.py)")
        return 1 if found else 0
    written = render(paths)
    count = sum(len(BLOCK.findall(p.read_text())) for p in paths)
    print(f"{count} generated blocks in {len(paths)} files; rewrote: "
          + (", ".join(shown(p) for p in written) or "none (all current)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
