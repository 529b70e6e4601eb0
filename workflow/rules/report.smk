# The tables -> results/report.pdf (nothing re-measured), plus each figure as a PNG for `snakemake --report`.
import json
from pathlib import Path

REPORT_FIGURES = {
    "verdicts_forest": "Verdicts",
    "params_flops": "Cost",
    "latency_memory": "Cost",
    "accuracy": "Accuracy",
    "extrapolation": "Accuracy",
    "loss_by_position": "Accuracy",
    "training_length": "Accuracy",
    "parameter_frontier": "Accuracy",
    "layouts": "Accuracy",
    "passkey": "Accuracy",
    "cost_accuracy": "Cost",
    "decode_latency": "Cost",
}


rule report:
    input:
        TABLES,
        JUDGED,
    output:
        pdf=report(
            f"{RESULTS}/report.pdf",
            caption="../report/report_pdf.rst",
            category="Report",
        ),
        figures=[
            report(
                f"{RESULTS}/plots/{name}.png",
                caption=f"../report/{name}.rst",
                category=category,
            )
            for name, category in REPORT_FIGURES.items()
        ],
    log:
        f"{RESULTS}/logs/report.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        tables=lambda wildcards, input: Path(input[0]).parent,
        plots=lambda wildcards, output: Path(output.figures[0]).parent,
        config_json=lambda wc: json.dumps(config),  # the effective config, defaults filled
    message:
        "report {RESULTS}/tables -> {output.pdf}"
    shell:
        "{params.py} -m posbench report --tables {params.tables} --out {output.pdf}"
        " --plots {params.plots} --config-json {params.config_json:q} > {log} 2>&1"
