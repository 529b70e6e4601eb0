# Tuning, a step of its own (posbench/tune.py): `snakemake results/tuning/lr.csv` tunes both arms of every
# deciding comparison of the preset on one learning-rate grid (3 pilot seeds, the comparison's budget,
# chosen on validation loss); its records lie under results/tuning/records/, outside the tables verdicts
# read. A preset then reads the chosen rates with train.lr_table: results/tuning/lr.csv (or a committed
# copy, results/reference/lr/lr.csv).
from pathlib import Path

TUNED = pw.tuned_comparisons(config)


rule tune:
    output:
        f"{RESULTS}/tuning/{{comparison}}.csv",
    log:
        f"{RESULTS}/logs/tune/{{comparison}}.log",
    wildcard_constraints:
        comparison=r"(?!lr$)[A-Za-z0-9_.-]+",
    conda:
        "../../envs/posbench.yaml"
    threads: config["train"]["threads"]
    resources:
        timing=1,
    params:
        py=PY,
        out=lambda wildcards, output: Path(output[0]).parent,
        preset=config["train"]["comparisons"],
    message:
        "tune {wildcards.comparison}: both arms on one learning-rate grid"
    shell:
        "{params.py} -m posbench tune --comparison {wildcards.comparison} --out {params.out}"
        " --preset {params.preset} --threads {threads} > {log} 2>&1"


rule lr_table:
    input:
        expand(f"{RESULTS}/tuning/{{comparison}}.csv", comparison=TUNED),
    output:
        f"{RESULTS}/tuning/lr.csv",
    log:
        f"{RESULTS}/logs/tune/lr_table.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        out=lambda wildcards, output: Path(output[0]).parent,
        comparisons=" ".join(TUNED),
        preset=config["train"]["comparisons"],
    message:
        "collect the tuned rates -> {output}"
    shell:
        "{params.py} -m posbench tune --comparison {params.comparisons} --out {params.out} --preset {params.preset}"
        " --lr-table {output}"
        " > {log} 2>&1"
