# One job per (task, encoding, size, seed): 20–40 s each on one core; they may run side by side.


rule train:
    output:
        pw.TRAIN_RECORD.replace("{results}", RESULTS),
    conda:
        "../../envs/posbench.yaml"
    log:
        f"{RESULTS}/logs/{{machine}}/train/{{task}}/{{size}}/{{encoding}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/train/{{task}}/{{size}}/{{encoding}}/seed{{seed}}.tsv"
    params:
        steps=lambda wc: (
            f"--steps {config['train']['steps']}" if config["train"]["steps"] else ""
        ),
        data=lambda wc: (
            f"--data {config['train']['data'][wc.task]}"
            if wc.task in config["train"]["data"]
            else ""
        ),
    threads: config["train"]["threads"]
    resources:
        timing=1,
    message:
        "train {wildcards.task} {wildcards.encoding} {wildcards.size} seed {wildcards.seed}"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {PY} -m posbench train --task {wildcards.task}"
        " --encoding {wildcards.encoding} --size {wildcards.size} --seed {wildcards.seed}"
        " --threads {threads} {params.steps} {params.data} --out {output} > {log} 2>&1"
