from pathlib import Path

# Every record under results/records/ (all machines) -> tables; failed cells stay as rows. The
# inputs are the batch manifests of this config: each is written after all of its records.


rule aggregate:
    input:
        BATCHES,
    output:
        TABLES,
        expand(
            f"{RESULTS}/tables/{{table}}.parquet",
            table=[*TABLE_NAMES, "items"],
        ),
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        records=f"{RESULTS}/records",
        tables=lambda wildcards, output: Path(output[0]).parent,
    message:
        "aggregate {RESULTS}/records into {RESULTS}/tables"
    shell:
        "{params.py} -m posbench aggregate --records {params.records} --out {params.tables} > {log} 2>&1"
