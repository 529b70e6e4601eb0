"""The ``paths`` part: one attention call (ALiBi bias, causal, :data:`~posbench.bench.base.BASE`'s heads
and head width at :data:`~posbench.bench.base.SEQ_LEN`) on each mask path and block size, against
``is_causal`` without a bias; FlexAttention with a ``score_mod`` when asked (``--flex``): what
:mod:`posbench.attention`'s choice of path and block size is checked against."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch

from posbench import attention
from posbench.bench.base import BASE, SEQ_LEN, BenchOptions, PartResult, Row, median, posbench_model
from posbench.measure import alternate
from posbench.positions import Positions

PATH_BLOCK_SIZES = (64, 128, 256, 512, SEQ_LEN)


def run(options: BenchOptions, out: Path) -> PartResult:
    """One attention call on each path and block size, the same q, k, v and ALiBi bias."""
    d_head = BASE["d_model"] // BASE["n_heads"]
    result = PartResult(f"paths: one attention call, ALiBi, causal, B=1, h={BASE['n_heads']}, L={SEQ_LEN}, "
                        f"d_head={d_head}, fp32, {options.device} (blocks of b queries; b={SEQ_LEN}: one call over "
                        "all keys)")
    encoding = posbench_model("alibi", device=options.device).encoding
    q, k, v = (torch.randn(1, BASE["n_heads"], SEQ_LEN, d_head).to(options.device) for _ in range(3))  # (B, h, L, d)
    steps = {"is_causal (no bias)": lambda: attention.attend(q, k, v, None, True)}
    variants = [(path, attention.SETTINGS.block_size) for path in attention.MASK_PATHS]
    variants += [("general_dense", SEQ_LEN)] + [("relative", b) for b in PATH_BLOCK_SIZES
                                                if b != attention.SETTINGS.block_size]
    positions = Positions.arange(SEQ_LEN, device=options.device)
    for path, block_size in variants:
        with attention.configured(force_path=path, block_size=block_size):
            mask = attention.build_mask(encoding, positions, positions, True)
        steps[f"{path}, b={block_size}"] = lambda mask=mask: attention.attend(q, k, v, mask, True)
    if options.flex:
        compile_s, steps["flex (compiled)"] = flex_step(encoding, q, k, v)
        result.notes.append(f"FlexAttention compiled in {compile_s:.1f} s (not in the median)")
    result.samples = alternate(steps, options.rounds, options.warmup, device=torch.device(options.device))
    reference = median(result.samples["is_causal (no bias)"])
    for name, samples in result.samples.items():
        result.rows += [Row("paths", name, "median", median(samples), "ms"),
                        Row("paths", name, "vs is_causal", median(samples) / reference, "x")]
    path = attention.choose_path(encoding, SEQ_LEN, SEQ_LEN, True, device=options.device)
    result.notes.append(f"the model's path for ALiBi/T5: {path}, b={attention.SETTINGS.block_size}")
    return result


def flex_step(encoding, q, k, v) -> tuple[float, Callable[[], object]]:
    """FlexAttention with ALiBi as a ``score_mod`` and a causal block mask, compiled (seconds, step)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    slopes = encoding.slopes

    def alibi(score, batch, head, query, key):
        return score - slopes[head] * (query - key).abs()

    began = time.perf_counter()
    block_mask = create_block_mask(lambda b, h, query, key: query >= key, None, None, q.shape[-2], k.shape[-2],
                                   device=str(q.device))
    compiled = torch.compile(flex_attention)

    def step():
        return compiled(q, k, v, score_mod=alibi, block_mask=block_mask)

    with torch.inference_mode():
        step()
    return time.perf_counter() - began, step
