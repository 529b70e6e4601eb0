"""``python -m posbench bench``: is the harness fast enough that latency differences are the encoding's,
not ours? Measured on this machine, one module per part (``--parts …``):

``paths``        :mod:`.attention_paths`: one attention call on each mask path and block size
``overhead``     :mod:`.encoding_overhead`: forward latency / ``none``'s
``peer``         :mod:`.x_transformers_peer`: posbench / x-transformers at the same configuration
``limit``        :mod:`.machine_limit`: a forward's achieved FLOP/s / the machine's matmul rate
``scale``        :mod:`.longest_length`: the longest length each encoding reaches, its memory
``decode``       :mod:`.decode_overhead`: per-token latency with a KV cache / ``none``'s
``decode_peer``  :mod:`.transformers_peer`: posbench / transformers ``generate`` per token
``train``        :mod:`.train_throughput`: a training step's FLOP/s and where its time goes

Unless a part says otherwise the model is a causal decoder of :data:`~posbench.bench.base.BASE`
(d = 256, 4 layers, 8 heads) at L = 1024, batch 1, fp32, inference mode. Which encodings ``overhead``,
``scale`` and ``decode`` time, and their targets, are declared once for the whole registry in
:mod:`posbench.bench.targets`; what the parts share is in :mod:`posbench.bench.base`, and
:mod:`posbench.bench.suite` runs them.

``--device cuda`` (or ``cuda:N``) runs ``paths``, ``overhead``, ``limit`` and ``decode`` there
(:data:`~posbench.bench.base.CUDA_PARTS`): models, inputs and caches placed on the GPU, each timed call
between CUDA events and closed by a synchronize; the other parts measure the host or a CPU peer and are
refused there. Without a visible GPU the command says so in one line and writes nothing.

Contenders of a part are timed in alternation, round by round (the order rotating), so a load
change on a shared machine hits all of them; each reports the median, the ratio of medians and the
median of each round's ratio (the paired ratio), which is what a target judges.
A contender that misses its target is profiled (``torch.profiler``) and the table saved beside
the results, so the note can say what limits it, measured. Measured results and the bench's history
are in ``results/reference/bench/``.
"""
