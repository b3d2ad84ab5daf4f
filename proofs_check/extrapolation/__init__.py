"""Length-extrapolation experiment (docs/theory.md §5, §7; docs/extrapolation.md).

Does the prior's class predict how a trained model extrapolates? A byte-level causal
transformer is trained with each positional variant on the Python standard library's
sources at one context length and evaluated, paired, at up to 32 times that length; the
measured window masses are put beside the exact prior masses of ``priors``.

Modules (one job each): ``data`` (offline corpus and split), ``variants`` (names),
``model`` (the transformer and its positional biases), ``train`` (AdamW, cosine,
checkpoints, resume), ``evaluate`` (paired evaluation, masses, Theorem 3 bracket),
``results`` (summaries, atomic JSON, tables), ``predictions`` (the qualitative checks),
``experiment`` (presets and the driver), ``figure`` (fig7), ``cli``
(``python -m proofs_check.extrapolation``).
"""
