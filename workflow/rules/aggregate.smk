from pathlib import Path

# Every record under results/records/ (all machines) -> tables; failed cells stay as rows. The
# inputs are the batch manifests of this config: each is written after all of its records.
#
# A comparison gets a second look where its first decided nothing clear (comparisons.yaml, seeds.looks):
# the checkpoint `first_look` aggregates and judges the first look's records into looks/first/<sizes>/,
# and the tables wait for the jobs of the second looks it asks for (every_batch in common.smk); the DAG
# grows only where a first look was unclear or unstable. Without declared comparisons there is no look.
# A folder per set of sizes: the scale preset's parts share one results folder, and a part must not read
# the look an earlier part left there as its own.
RUN_SIZES = pw.joined(config["train"]["sizes"])
FIRST_LOOK = f"{RESULTS}/looks/first/{RUN_SIZES}"


checkpoint first_look:
    input:
        [pw.own_lr_table(RESULTS, size) for size in pw.tuned_in_run(config)],  # every size's, scheduled at once
        first_batches,
    output:
        f"{FIRST_LOOK}/verdicts.csv",
    log:
        f"{RESULTS}/logs/first_look-{RUN_SIZES}.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        records=f"{RESULTS}/records",
        tables=lambda wildcards, output: Path(output[0]).parent,
        preset=config["preset"],
    message:
        "the first look: judge the comparisons' first seeds -> {output}"
    shell:
        "({params.py} -m posbench aggregate --records {params.records} --out {params.tables}"
        " && {params.py} -m posbench judge --tables {params.tables} --preset {params.preset:q}) > {log} 2>&1"


rule aggregate:
    input:
        every_batch,
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
