# The tables -> results/report.pdf (nothing re-measured), plus each figure as a PNG for `snakemake --report`.
import json
import os
from pathlib import Path

from posbench.report.figures import REPORT_FIGURES

# Each figure's caption for `snakemake --report`, written by the report job from the figure's spec
# (posbench.report.figures) beside its PNG.
CAPTIONS = {spec.name: f"{RESULTS}/plots/{spec.name}.rst" for spec in REPORT_FIGURES}


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
                f"{RESULTS}/plots/{spec.name}.png",
                # absolute: Snakemake reads a relative caption beside this file
                caption=os.path.abspath(CAPTIONS[spec.name]),
                category=spec.category,
            )
            for spec in REPORT_FIGURES
        ],
        captions=list(CAPTIONS.values()),
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
