"""The analytic memory of a cell: exact counts where they are counts, and within a stated factor of the
peaks small CPU cells reach when they run."""

import gc
import os
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from posbench import encodings, measure, records
from posbench.footprint import BUILT_UP_TO, cell_memory, described, device_memory, human, rest_parameters
from posbench.model import ModelConfig, build_model, count_params
from posbench.profile import (
    MEMORY_PASS_STEPS,
    ProfileConfig,
    make_step,
    model_config,
    profile_together,
    weight_dtype,
)

MIB = 2**20


@pytest.mark.parametrize("name", encodings.names())
def test_weights_are_the_bytes_of_every_parameter_and_buffer_the_model_builds(name):
    cfg = ModelConfig.from_size("tiny", encoding=name, max_len=96)
    model = build_model(cfg).to(torch.bfloat16)
    built = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    assert cell_memory(cfg, 1, 8, "infer", torch.bfloat16)["weights"] == built
    assert rest_parameters(cfg) == count_params(model)["rest"]
    assert cell_memory(cfg, 1, 8, "train", torch.bfloat16)["optimizer"] == 3 * 4 * count_params(model)["total"]


@pytest.mark.parametrize("name, row_bytes", [("learned", 64 * 4), ("rope", 8 * 2 * 4), ("alibi", 2 * 4 * 4)])
def test_beyond_the_real_build_the_meta_build_counts_the_same_tables(name, row_bytes):
    """A table of one more position past BUILT_UP_TO (counted on the meta device) costs one row more."""
    weights = [cell_memory(ModelConfig.from_size("tiny", encoding=name, max_len=n), 1, 8)["weights"]
               for n in (BUILT_UP_TO, BUILT_UP_TO + 1)]
    assert weights[1] - weights[0] == row_bytes


def test_the_terms_of_known_cells():
    tiny = dict(d_model=64, n_layers=2, n_heads=4)  # w = 64, d_ff = 256, vocab 256
    w, f, v, n, h = 64, 256, 256, 2, 4
    infer = cell_memory(ModelConfig(**tiny, encoding="none", max_len=1000), 2, 1000, "infer")
    assert infer["activations"] == 2 * 1000 * (3 * w + 2 * f) * 4 and infer["attention_bias"] == 0
    decode = cell_memory(ModelConfig(**tiny, encoding="none", max_len=1001), 2, 1000, "decode", torch.bfloat16)
    assert decode["kv_cache"] == 2 * n * 2 * 1001 * w * 2 and decode["activations"] == 2 * 1000 * 704 * 2
    train = cell_memory(ModelConfig(**tiny, encoding="rope", max_len=1000), 1, 1000, "train")
    assert train["activations"] == 1000 * (n * (11 * w + 2 * f + 2 * w) + 2 * w + 2 * f + 3 * v) * 4
    alibi = cell_memory(ModelConfig(**tiny, encoding="alibi", max_len=1000), 1, 1000, "infer")
    assert alibi["attention_bias"] == h * 1999 * 2 * 4  # the (h, 2L − 1) table and its causal copy
    # FIRE: the mask, -inf at future keys already (no causal copy); the features of the pairs its MLP runs on
    # (the causal half), its output with the -inf column, one slice's hidden layer
    fire = cell_memory(ModelConfig(**tiny, encoding="fire", max_len=1000), 1, 1000, "infer")  # general_dense
    pairs = 1000 * 1001 // 2
    assert fire["attention_bias"] == (h * 1000 * 1000 + pairs + h * (pairs + 1) + 8192 * 32) * 4
    blocked = cell_memory(ModelConfig(**tiny, encoding="fire", max_len=8192), 1, 8192, "infer")  # 256 rows
    last_block = 256 * 8192 - 256 * 255 // 2  # the last 256 queries, each up to its own token
    assert blocked["attention_bias"] == (h * 256 * 8192 + last_block + h * (last_block + 1) + 8192 * 32) * 4
    trained = cell_memory(ModelConfig(**tiny, encoding="fire", max_len=1000), 1, 1000, "train")
    assert trained["attention_bias"] == (h * 1000 * 1000 + pairs * (1 + 2 * 32)) * 4 * 2  # and grads
    t5 = cell_memory(ModelConfig(**tiny, encoding="t5", max_len=1000), 1, 1000, "train")
    logits = 256 * 256 * (3 * 4 // 2) + 232 * 1000  # 3 full causal blocks of 256 queries, then 232 queries
    assert t5["attention_scores"] == n * h * logits * 4  # SDPA's math kernel: the bias needs a gradient
    assert cell_memory(ModelConfig(**tiny, encoding="t5", max_len=1000), 1, 1000, "infer")["attention_scores"] == 0


def test_the_estimate_grows_as_the_cell_does():
    base = ModelConfig.from_size("base", encoding="rope", max_len=10**9)
    terms = cell_memory(base, 1, 10**9)
    assert described(terms) == "10.4 TiB (activations 10.2 TiB, weights 119 GiB)"
    half = cell_memory(base.replace(max_len=5 * 10**8), 1, 5 * 10**8)
    assert half["activations"] * 2 == terms["activations"]
    one_slice = 8192 * 32 * 4  # FIRE's hidden layer of one MLP slice (its ReLU in place)
    fire = [cell_memory(ModelConfig.from_size("tiny", encoding="fire", max_len=n), 1, n)["attention_bias"] - one_slice
            for n in (512, 1024)]
    assert 3.99 < fire[1] / fire[0] < 4  # quadratic: the dense bias and FIRE's MLP over the causal half
    assert [human(b) for b in (0, 1023, 1024, 3.5 * 2**40, 2**60)] == ["0 B", "1023 B", "1 KiB", "3.5 TiB",
                                                                       "1.02e+03 PiB"]


def test_the_cpu_holds_the_machines_physical_memory():
    assert device_memory("cpu") == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if not torch.cuda.is_available():
        assert device_memory("cuda") is None and device_memory("cuda:3") is None


# ----- against measured peaks ----------------------------------------------------------------------
# Each cell in a fresh process (run_isolated): a tiny model of the same mode runs first, so the runtime's
# own share (the first kernels, the optimizer's code: about 30 MiB, 110 MiB in training) is paid before the
# resident high-water mark is reset; then the cell is built, its step made (a decode cell's prefill) and
# run MEMORY_PASS_STEPS times, as a profile job's child does. Measured / estimated on 2026-12-01 (AMD EPYC,
# 2 shared cores, glibc's default malloc): 1.26, 1.32, 1.21 and 1.03 for the cells below, in order (and
# 1.52 for learned base L=8192); a run that subtracted the runtime measured in a separate process gave
# 1.35, 1.29 (t5 at 4096), 1.41, 0.93 and 1.68. The estimate counts live tensors; the rest is the allocator
# keeping freed memory: with MALLOC_MMAP_THRESHOLD_=131072, which returns it, the same cells measured
# 0.63 to 1.04 of their estimates. FIRE's cell, once its MLP ran on the visible pairs in slices (not on every pair
# at once), measured 213 MiB, 1.34 of its estimate (0.65 with that setting); those figures are of the estimate
# that still counted a causal copy of FIRE's bias. Since FIRE gathers -inf with it (2026-12-03, Intel Xeon,
# with that setting): 0.93 at batch 2, and 1.03 at batch 1, whose estimate fell under the 100 MiB below.
MEASURED = [
    dict(encoding="none", size="base", seq_len=16384),  # activations
    dict(encoding="t5", size="small", seq_len=2048, mode="train"),  # SDPA's math kernel keeps the softmax
    dict(encoding="fire", size="tiny", seq_len=8192, batch=2),  # blocked bias rows and FIRE's MLP over them (at
    # batch 1 its estimate fell under 100 MiB once FIRE held no causal copy: 94.9 MiB, measured 98 MiB, 1.03)
    dict(encoding="alibi", size="small", seq_len=8192, mode="decode", batch=2),  # the preallocated KV cache
]


def peak_of_a_cell(payload: dict, sections: dict) -> None:
    """Child: the runtime warmed up on a tiny model of the cell's mode, then the cell's peak above that."""
    torch.set_num_threads(1)
    run_cell(ProfileConfig(encoding="none", size="tiny", seq_len=16, mode=payload["mode"]))
    gc.collect()
    with measure.CpuMemoryMonitor() as cpu:
        run_cell(ProfileConfig(**payload))
    sections["peak_bytes"] = cpu.result()["above_baseline_mib"] * MIB


def run_cell(config: ProfileConfig) -> None:
    torch.manual_seed(config.seed)
    model = build_model(model_config(config)).to(dtype=weight_dtype(config))
    step = make_step(model, config)
    for _ in range(MEMORY_PASS_STEPS):
        step()


@pytest.mark.parametrize("cell", MEASURED, ids=lambda c: f"{c['encoding']}-{c['size']}-{c['seq_len']}")
def test_the_measured_peak_of_a_cpu_cell_is_within_a_factor_of_two_of_its_estimate(monkeypatch, cell):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    # glibc returns freed blocks above 128 KiB at once: the peak is the live tensors the estimate counts, not
    # what the default heap happens to keep (FIRE's cell measured 1.21-2.05 of its estimate without it; with it,
    # 2026-12-01 on this AMD EPYC: 1.01, 1.02, 0.56 (three runs: 89.4-89.6 MiB of 159), 0.88 for the cells below)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    config = ProfileConfig(**cell)
    outcome = measure.run_isolated(peak_of_a_cell, asdict(config))
    assert outcome.status == "ok", outcome.reason
    estimate = sum(cell_memory(model_config(config), config.batch, config.seq_len, config.mode).values())
    ratio = outcome.sections["peak_bytes"] / estimate
    print(f"{cell}: measured {human(outcome.sections['peak_bytes'])}, estimated {human(estimate)}, ratio {ratio:.2f}")
    assert estimate > 100 * MIB and 0.5 <= ratio <= 2


# ----- a cell its device cannot hold is recorded, not run --------------------------------------------
def test_a_cell_its_device_cannot_hold_is_recorded_oom_with_its_estimate_and_never_run(monkeypatch):
    """As on a GPU node whose device the config check could not see: the job finds it too small."""
    monkeypatch.setattr("posbench.profile.missing_device", lambda device: None)
    monkeypatch.setattr("posbench.footprint.device_memory", lambda device: 8 * 2**30 if device == "cuda" else None)
    monkeypatch.setattr(measure, "run_isolated", lambda *args: pytest.fail("a cell that cannot fit was run"))
    small, large = (ProfileConfig(encoding="rope", size="base", seq_len=L, device="cuda", max_len=2**20)
                    for L in (1024, 2**20))
    (record,) = profile_together([large])  # 2**20 tokens × (3·256 + 2·1024) × 4 B; rope turns 128 MiB
    assert record["status"] == "oom" and records.validate(record)
    assert record["reason"] == ("not run: 1048576 tokens of rope at size base (infer, float32, batch 1) need an "
                                "estimated 11.1 GiB (activations 11 GiB, weights 141 MiB), more than cuda holds "
                                "(8 GiB)")
    with pytest.raises(pytest.fail.Exception, match="a cell that cannot fit was run"):
        profile_together([small])  # it fits: measured
