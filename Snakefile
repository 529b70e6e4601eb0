# posbench: every positional encoding through one harness.
#   snakemake --cores 8                                   the default sweep (config.yaml)
#   snakemake --cores 2 --configfile workflow/smoke.yaml  the whole DAG in a few minutes
#   snakemake --cores 8 --configfile workflow/full.yaml   every declared comparison, learning-rate check, long grids
from snakemake.utils import min_version

min_version("9.0")


# A preset given with --configfile replaces config.yaml instead of deep-merging into it, here and
# in every cluster job (which receives the same --configfiles).
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/probe.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/judge.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/report.smk"


# The run's own first look beside the report: the tables wait on it only through an input function, which
# Snakemake does not evaluate where the tables exist, so without it a scale part run into a folder that an
# earlier part finished would call everything up to date and train nothing.
rule all:
    default_target: True
    input:
        f"{RESULTS}/report.pdf",
        [] if config["train"]["comparisons"] == "none" else f"{FIRST_LOOK}/verdicts.csv",
