"""The ``decode_peer`` part: posbench's ``generate`` against Hugging Face transformers' per
generated token (prefill excluded) for ``learned`` (GPT-2) and ``rope`` (Llama), same size, randomly
initialised (nothing downloaded): posbench's decode cost read against the generation loop people run."""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from posbench.bench.base import (
    BASE,
    BenchOptions,
    PartResult,
    Row,
    median,
    posbench_model,
    ratio_rows,
    save_profile,
)
from posbench.measure import alternate
from posbench.model import count_params

DECODE_PEER_TARGET = 1.0  # posbench's per-token latency / transformers'
LLAMA_INTERMEDIATE = round(8 * BASE["d_model"] / 3)  # SwiGLU's three d×683 matrices ≈ posbench's two d×4d
DECODE_PEERS = {"learned": "GPT-2", "rope": "Llama"}  # posbench encoding -> the transformers model with its positions


def transformers_model(encoding: str, max_len: int) -> torch.nn.Module:
    """The ``decode_peer`` part at posbench's base configuration (width, layers, heads, vocabulary 256, ``max_len``
    positions), randomly initialised from its config (nothing downloaded), output head untied as
    posbench's, SDPA attention, no dropout. ``learned``: GPT-2 (a learned position table; exact GELU,
    d_ff = 4d; its projections carry biases, posbench's do not). ``rope``: Llama (RoPE over the whole
    head, base 10 000; RMSNorm without bias; SwiGLU of :data:`LLAMA_INTERMEDIATE`, about 4d's two
    matrices in three)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    d, layers, heads = BASE["d_model"], BASE["n_layers"], BASE["n_heads"]
    tokens = dict(vocab_size=256, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                  attn_implementation="sdpa")
    torch.manual_seed(0)
    if encoding == "learned":
        config = GPT2Config(n_embd=d, n_layer=layers, n_head=heads, n_inner=4 * d, n_positions=max_len,
                            activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **tokens)
        return GPT2LMHeadModel(config).eval()
    if encoding == "rope":
        config = LlamaConfig(hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                             num_key_value_heads=heads, intermediate_size=LLAMA_INTERMEDIATE,
                             max_position_embeddings=max_len, rope_theta=10_000.0, attention_bias=False,
                             mlp_bias=False, **tokens)
        return LlamaForCausalLM(config).eval()
    raise ValueError(f"no transformers peer for {encoding!r}; allowed: {', '.join(DECODE_PEERS)}")


def generation_step(model: torch.nn.Module, generate: Callable[[torch.Tensor], torch.Tensor], prompt: torch.Tensor,
                    new_tokens: int) -> Callable[[], float]:
    """One ``generate(prompt)`` call per step, returning its per-token decode milliseconds: from the end
    of the first forward (the prefill, which also gives the first token) to the end of the last, over
    the ``new_tokens - 1`` forwards between — the loop's whole cost per token (forward, cache update,
    choosing the token) without the prefill. Checks that it ran exactly ``new_tokens`` forwards and
    made ``new_tokens`` tokens (no early stop)."""
    if new_tokens < 2:
        raise ValueError(f"new_tokens must be at least 2 (one after the prefill's), got {new_tokens}")
    stamps: list[float] = []
    model.register_forward_hook(lambda *_: stamps.append(time.perf_counter()))

    def step() -> float:
        stamps.clear()
        tokens = generate(prompt)
        if len(stamps) != new_tokens or tokens.shape[1] != prompt.shape[1] + new_tokens:
            raise RuntimeError(f"generate ran {len(stamps)} forwards for {tokens.shape[1] - prompt.shape[1]} "
                               f"tokens; expected {new_tokens} of each")
        return (stamps[-1] - stamps[0]) * 1e3 / (new_tokens - 1)

    return step


def transformers_generate(model: torch.nn.Module, new_tokens: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """transformers' ``generate`` as a user calls it: greedy, its default cache, exactly ``new_tokens``."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, num_beams=1, use_cache=True,
                              eos_token_id=None, pad_token_id=None)  # no end-of-sequence token: never stops early
    return lambda prompt: model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)


def run(options: BenchOptions, out: Path) -> PartResult:
    """Per generated token inside each library's ``generate`` after a prompt of C tokens,
    posbench / transformers for GPT-2 (``learned``) and Llama (``rope``), the four alternated."""
    new_tokens = options.decode_new_tokens
    result = PartResult(f"decode_peer: per-token latency in generate, posbench / transformers (greedy, batch 1, fp32, "
                        f"{torch.get_num_threads()} threads, {new_tokens} new tokens after a prompt of C, "
                        f"prefill excluded; d={BASE['d_model']}, {BASE['n_layers']} layers, {BASE['n_heads']} heads, "
                        f"vocabulary 256)")
    try:
        result.title += f", transformers {version('transformers')}"
    except PackageNotFoundError:
        result.notes.append("skipped: transformers is not installed (pip install 'posbench[bench]')")
        return result
    from posbench.model import generate

    for context in options.decode_contexts:
        prompt = torch.randint(0, 256, (1, context), generator=torch.Generator().manual_seed(0))
        steps, params, caches = {}, {}, {}
        for name in DECODE_PEERS:
            ours, theirs = posbench_model(name, context + new_tokens), transformers_model(name, context + new_tokens)
            steps[f"{name}/posbench"] = generation_step(ours, lambda p, m=ours: generate(m, p, new_tokens),
                                                        prompt, new_tokens)
            steps[f"{name}/transformers"] = generation_step(theirs, transformers_generate(theirs, new_tokens),
                                                            prompt, new_tokens)
            params[name] = (count_params(ours)["total"], sum(p.numel() for p in theirs.parameters()))
            caches[name] = default_cache(theirs)
        samples = alternate(steps, options.rounds, options.warmup, self_timed=True)
        result.samples.update({f"{key}@{context}": s for key, s in samples.items()})
        for name, peer in DECODE_PEERS.items():
            ours, theirs = samples[f"{name}/posbench"], samples[f"{name}/transformers"]
            item = f"{name} vs {peer} C={context}"
            ratios = ratio_rows("decode_peer", item, ours, theirs, DECODE_PEER_TARGET)
            result.rows += [Row("decode_peer", item, "posbench", median(ours), "ms"),
                            Row("decode_peer", item, "transformers", median(theirs), "ms"),
                            Row("decode_peer", item, "params", params[name][0]),
                            Row("decode_peer", item, "params diff",
                                100 * (params[name][1] - params[name][0]) / params[name][0], "%"),
                            *ratios]
            if ratios[-1].meets is False:
                save_profile(out, result, f"decode_peer_{name}_{context}",
                             {key: steps[f"{name}/{key}"] for key in ("posbench", "transformers")})
    result.notes += [
        f"ms: per generated token, the median over {options.rounds} rounds (after {options.warmup} warm-up) of "
        f"(end of the last forward - end of the first) / {new_tokens - 1} inside one generate call; each round calls "
        "the four contenders once, the order rotating; paired ratio: the median of each round's ratio",
        f"transformers: randomly initialised from GPT2Config / LlamaConfig (no download), generate with "
        f"do_sample=False, use_cache=True, its default cache ({', '.join(sorted(set(caches.values())))}), no "
        "end-of-sequence token; SDPA attention in both libraries; untied output heads in both",
        f"params diff (transformers - posbench): GPT-2's projections carry biases (9·d per layer); Llama has "
        f"SwiGLU of 3·d·{LLAMA_INTERMEDIATE} per layer for posbench's 2·d·4d GELU MLP and RMSNorm without "
        "bias; the position tables (learned) are equal",
    ]
    return result


def default_cache(model: torch.nn.Module) -> str:
    """The cache class transformers' ``generate`` uses by default for ``model`` (read from one call)."""
    prompt = torch.ones(1, 2, dtype=torch.long)
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=1, do_sample=False,
                             return_dict_in_generate=True)
    cache = out.cache if "cache" in out else out.past_key_values  # renamed in transformers 5
    return type(cache).__name__
