# Tuning, a step of its own (posbench/tune.py): `snakemake results/tuning/lr-tiny.csv` tunes both arms of every
# deciding comparison of the preset at one size (tiny here) on one learning-rate grid (3 pilot seeds, the
# comparison's budget, chosen on validation loss); its records lie under results/tuning/records/<size>/,
# outside the tables verdicts read. A preset then reads the chosen rates with train.lr_table:
# results/tuning/lr-tiny.csv, or results/tuning/lr-{size}.csv for a table per size (the scale preset), or a
# committed copy (results/reference/lr/lr.csv).
from pathlib import Path

TUNED = pw.tuned_comparisons(config)


rule tune:
    output:
        f"{RESULTS}/tuning/{{comparison}}-{{size}}.csv",
    log:
        f"{RESULTS}/logs/tune/{{comparison}}-{{size}}.log",
    wildcard_constraints:
        comparison=r"(?!lr-)[A-Za-z0-9_.-]+",  # not the lr table itself (lr-<size>.csv)
    priority: lambda wildcards: pw.tune_priority(wildcards.comparison, wildcards.size)
    conda:
        "../../envs/posbench.yaml"
    threads: config["train"]["threads"]
    resources:
        timing=1,
        gpu=int(on_cuda(config["train"]["device"])),
        constraint=GPU_MODEL if on_cuda(config["train"]["device"]) else None,
    params:
        py=PY,
        out=lambda wildcards, output: Path(output[0]).parent,
        preset=config["train"]["comparisons"],
        device=config["train"]["device"],
        start=(
            f"--start-from {config['train']['lr_start']}"
            if config["train"]["lr_start"]
            else ""
        ),
    message:
        "tune {wildcards.comparison} at {wildcards.size}: both arms on one learning-rate grid"
    shell:
        "{params.py} -m posbench tune --comparison {wildcards.comparison} --size {wildcards.size} --out {params.out}"
        " --preset {params.preset} --device {params.device} {params.start} --threads {threads} > {log} 2>&1"


# a preset whose train.lr_table is this table trains once it exists (first_batches); it collects the tune rule's
# tables and trains nothing (tuning again here would retrain cells whose grid start or device differs)
checkpoint lr_table:
    input:
        lambda wildcards: expand(
            f"{RESULTS}/tuning/{{comparison}}-{wildcards.size}.csv", comparison=TUNED
        ),
    output:
        pw.own_lr_table(RESULTS, "{size}"),
    log:
        f"{RESULTS}/logs/tune/lr_table-{{size}}.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        out=lambda wildcards, output: Path(output[0]).parent,
        comparisons=" ".join(TUNED),
        preset=config["train"]["comparisons"],
    message:
        "collect the tuned rates at {wildcards.size} -> {output}"
    shell:
        "{params.py} -m posbench tune --comparison {params.comparisons} --size {wildcards.size} --out {params.out}"
        " --preset {params.preset} --lr-table {output} --collect > {log} 2>&1"
