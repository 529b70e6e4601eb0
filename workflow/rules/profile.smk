# One job per cost cell (oom, skipped and error cells write records too). A profile job claims the whole `timing` budget, so no other job of this
# workflow (timing or training) runs beside it and pollutes its latency; training jobs claim one unit.


rule profile:
    output:
        pw.PROFILE_RECORD.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/profile/{{device}}/{{mode}}/{{size}}/{{encoding}}/L{{seq_len}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/profile/{{device}}/{{mode}}/{{size}}/{{encoding}}/L{{seq_len}}.tsv"
    conda:
        "../../envs/posbench.yaml"
    threads: config["profile"]["threads"]
    resources:
        timing=100,
        gpu=lambda wc: 1 if wc.device.startswith("cuda") else 0,
    params:
        py=PY,
        p=config["profile"],
        # one table size for the whole sweep: a learned encoding's parameters don't vary by cell
        max_len=config["profile"]["max_len"]
        or max(config["profile"]["seq_lens"], default=1),
    message:
        "profile {wildcards.encoding} {wildcards.size} L={wildcards.seq_len} on {wildcards.device} ({wildcards.mode})"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench profile"
        " --encoding {wildcards.encoding} --size {wildcards.size} --seq-len {wildcards.seq_len}"
        " --device {wildcards.device} --mode {wildcards.mode} --batch {params.p[batch]}"
        " --dtype {params.p[dtype]} --threads {threads} --min-repeats {params.p[min_repeats]}"
        " --min-seconds {params.p[min_seconds]} --max-len {params.max_len} --out {output} > {log} 2>&1"
        # an `error` record (exit 1) is a result too: keep it; a bad argument writes none and fails
        " || test -s {output}"
