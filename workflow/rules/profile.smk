# One job per (device, mode, size, encoding), measuring every length in turn, each in a fresh process
# (oom, skipped and error cells write records too; a skipped or error cell fails the job, which then
# writes no manifest, so a rerun tries it again). A profile job claims the whole `timing` budget,
# so no other job of this workflow (timing or training) runs beside it and pollutes its latency;
# training jobs claim one unit. Every device is checked once first (preflight): one the config names
# but this machine lacks stops the run there, in one line.


rule preflight:
    output:
        pw.PREFLIGHT.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/preflight/{{device}}.log",
    conda:
        "../../envs/posbench.yaml"
    resources:
        gpu=lambda wc: 1 if wc.device.startswith("cuda") else 0,
    params:
        py=PY,
    message:
        "preflight: can this job use {wildcards.device}?"
    shell:
        "{params.py} -m posbench preflight --device {wildcards.device} --out {output} > {log} 2>&1"
        " || {{ tail -n 1 {log} >&2; exit 1; }}"


rule profile:
    input:
        pw.PREFLIGHT.replace("{results}", RESULTS),
    output:
        pw.PROFILE_BATCH.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/profile/{{device}}/{{mode}}/{{size}}/{{encoding}}/L{{seq_lens}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/profile/{{device}}/{{mode}}/{{size}}/{{encoding}}/L{{seq_lens}}.tsv"
    conda:
        "../../envs/posbench.yaml"
    threads: config["profile"]["threads"]
    resources:
        timing=100,
        gpu=lambda wc: 1 if wc.device.startswith("cuda") else 0,
        # on SLURM: a CPU timing job has its node to itself; a GPU job asks for its one GPU only, and
        # room for a CUDA parent and child process
        slurm_extra=lambda wc: "" if wc.device.startswith("cuda") else "--exclusive",
        mem_mb=lambda wc: 16000 if wc.device.startswith("cuda") else 6000,
    params:
        py=PY,
        p=config["profile"],
        seq_lens=lambda wc: pw.split(wc.seq_lens),
        # one table size for the whole sweep: a learned encoding's parameters don't vary by cell
        max_len=pw.profile_max_len(config),
        records=record_out(pw.PROFILE_RECORD),
    message:
        "profile {wildcards.encoding} {wildcards.size} L={params.seq_lens} on {wildcards.device} ({wildcards.mode})"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench profile"
        " --encoding {wildcards.encoding} --size {wildcards.size} --seq-len {params.seq_lens}"
        " --device {wildcards.device} --mode {wildcards.mode} --batch {params.p[batch]}"
        " --dtype {params.p[dtype]} --threads {threads} --min-repeats {params.p[min_repeats]}"
        " --min-seconds {params.p[min_seconds]} --max-len {params.max_len}"
        " --out {params.records:q} --manifest {output} > {log} 2>&1"
