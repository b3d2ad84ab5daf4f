"""Diagnose a Hugging Face checkpoint: the positional prior of every head, its class, its
exact window/distant masses, and (``--measure``) Theorem 3 checked on the model's attention.

    python -m priors.diagnose PATH [--window W] [--length L ...] [--score-bound B]
                                   [--tol TOL [--lmin L0]] [--json] [--plot FILE]
                                   [--measure [--measure-length N ...] [--text FILE]]

``PATH`` is a local model directory (``config.json``, with or without weights in
safetensors or PyTorch format) or a ``config.json`` file. Nothing is downloaded.

Layering (docs/theory.md §5): ``checkpoint`` reads the config and named tensors (numpy and
safetensors, no torch unless a ``.bin`` must be read), ``config`` checks each value read;
``families`` maps each family to priors of ``priors.encodings`` through ``alibi``, ``t5``
and ``bounded`` (which uses ``layers`` for masked layers and ``scaling`` for logit
temperatures); ``report`` computes the exact numbers and ``text`` prints them; ``measure``
(torch and transformers, imported only for ``--measure``) runs the model, ``checks``
computes the per-row numbers and ``measurement`` explains them; ``plot`` draws
(matplotlib, imported only for ``--plot``).

>>> import json, os, tempfile
>>> d = tempfile.mkdtemp()
>>> cfg = {"model_type": "bloom", "n_layer": 2, "n_head": 4, "hidden_size": 64}
>>> with open(os.path.join(d, "config.json"), "w") as fh:
...     json.dump(cfg, fh)
>>> r = diagnose(d, window=4, lengths=[16])
>>> [h.prior.params["slope"] for h in r.heads]
[0.25, 0.0625, 0.015625, 0.00390625]
>>> r.heads[0].prior.classification.label
'summable'
"""

from __future__ import annotations

from typing import Any

from priors.diagnose.config import INSTALL_HINT

__all__ = ["INSTALL_HINT", "diagnose"]


def diagnose(path: str, **kwargs: Any) -> Any:
    """``priors.diagnose.report.evaluate`` on the priors of the checkpoint at ``path``.

    Keyword arguments: ``window``, ``lengths``, ``score_bound``, ``dps``, ``tol``, ``lmin``
    (see ``evaluate``). Returns a ``Diagnosis``; ``ValueError`` on bad input or files.
    """
    from priors.diagnose.checkpoint import load_checkpoint
    from priors.diagnose.families import model_priors
    from priors.diagnose.report import evaluate

    ckpt = load_checkpoint(path)
    try:
        priors = model_priors(ckpt)
    except (TypeError, AttributeError, KeyError, IndexError) as exc:
        # every value is read through priors.diagnose.config; this is the last guard
        raise ValueError("config: a value has a type the diagnosis cannot read "
                         f"({type(exc).__name__})") from exc
    return evaluate(str(path), priors, **kwargs)
