"""Length-extrapolation experiment (docs/theory.md §5, §7; docs/extrapolation.md).

How far does the prior predict a trained model's extrapolation? Byte-level causal
transformers are trained with each positional variant on the Python standard library's
sources at one context length and evaluated, paired against a sliding baseline, at up to
64 times that length; predictions registered from the priors before training are
checked against the results.

Modules (one job each): ``data`` (offline corpus, split, held-out windows), ``variants``
(names, parsed once, and their priors), ``model`` (the transformer and its positional
biases), ``probe`` (the planted-value retrieval probe), ``train`` (AdamW, cosine,
checkpoints, resume), ``evaluate`` (baseline, lengths, masses, Theorem 3 bracket, probe),
``results`` (bootstrap summaries, atomic JSON, tables), ``lossmodel`` (the dilution and
the fitted loss model), ``predictions`` (registration and checks), ``experiment`` (presets
and the driver), ``figure`` (fig7), ``cli`` (``python -m proofs_check.extrapolation``).
"""
