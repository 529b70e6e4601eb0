# One job per probe cell: a few seconds with random embeddings, up to ~40 s with a trained lm_prose
# model, on one core. Jobs may run side by side (they claim one unit of `timing`, as training does).


rule probe:
    output:
        pw.PROBE_RECORD.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/probe/{{embedding}}/{{encoding}}/{{tokens}}/L{{seq_len}}/d{{d_model}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/probe/{{embedding}}/{{encoding}}/{{tokens}}/L{{seq_len}}/d{{d_model}}/seed{{seed}}.tsv"
    wildcard_constraints:
        embedding=r"random|trained",
        tokens=r"V[0-9]+|lm_prose",
        d_model=r"[0-9]+",
    conda:
        "../../envs/posbench.yaml"
    threads: config["probe"]["threads"]
    resources:
        timing=1,
    params:
        py=PY,
        vocab=lambda wc: f"--vocab {wc.tokens[1:]}" if wc.tokens.startswith("V") else "",
        steps=config["probe"]["train_steps"],
    message:
        "probe {wildcards.encoding} d={wildcards.d_model} {wildcards.embedding} {wildcards.tokens} L={wildcards.seq_len} seed {wildcards.seed}"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench probe --encoding {wildcards.encoding}"
        " --d-model {wildcards.d_model} --embedding {wildcards.embedding} {params.vocab}"
        " --seq-len {wildcards.seq_len} --seed {wildcards.seed} --train-steps {params.steps}"
        " --threads {threads} --out {output} > {log} 2>&1"
