"""``--measure``: run the checkpoint and check Theorem 3 on its attention (docs/theory.md §5).

Imports torch and transformers (so it is imported only for ``--measure``). The model is
loaded from the local directory with ``local_files_only=True`` (nothing is downloaded, and
no environment variable is set) and ``attn_implementation="eager"``, whose attention
modules return their softmax weights, in float32. A forward hook on each causal
self-attention module (decoder-only models: every layer's attention; T5 family: the
decoder's ``SelfAttention``) hands that layer's weights (``1 x H x n x n``) to
``priors.diagnose.checks.check_layer`` and drops them: one layer's attention is in memory
at a time. ``priors.diagnose.measurement`` turns the per-head numbers into a verdict.

The prior checked is the one transformers' eager code applies (``HeadPrior.eager_encoding``:
for Falcon-ALiBi twice the checkpoint's slope, for MPT ALiBi with ``alibi_bias_max = 8``;
see ``priors.diagnose.alibi``). A logit temperature multiplies the content of a uniform
prior, so the check is unchanged and the spread it measures is ``tau(l)`` times the
content's.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from priors.diagnose.checks import RowPrior, check_layer, row_prior
from priors.diagnose.config import INSTALL_HINT
from priors.diagnose.families import T5_FAMILIES
from priors.diagnose.heads import HeadPrior, ModelPriors
from priors.diagnose.measurement import Measurement

__all__ = ["measure"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json",
                    "vocab.txt", "spiece.model", "sentencepiece.bpe.model", "merges.txt")


@contextlib.contextmanager
def _quiet_transformers(transformers: Any) -> Iterator[None]:
    """transformers' log level and progress bars silenced, and restored afterwards."""
    logging = transformers.utils.logging
    level = logging.get_verbosity()
    bars = logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def _load(path: str, is_t5: bool) -> Any:
    """The model at ``path``: float32, eager attention, local files only."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ValueError(f"--measure needs torch and transformers ({INSTALL_HINT})") from exc
    if not os.path.isdir(path):
        raise ValueError("--measure needs a model directory with weights, not a config file")
    auto = transformers.AutoModelForSeq2SeqLM if is_t5 else transformers.AutoModelForCausalLM
    with _quiet_transformers(transformers):
        try:
            model = auto.from_pretrained(path, local_files_only=True,
                                         attn_implementation="eager", dtype=torch.float32)
        except Exception as exc:  # OSError (no weights), ValueError, RuntimeError (shapes), ...
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ValueError(f"--measure: cannot load the model from {path!r}: "
                             f"{type(exc).__name__}: {first}") from exc
    return model.eval()


def _tokens(path: str, n: int, text: str | None, text_name: str, seed: int,
            vocab: int) -> tuple[Any, str]:
    """``1 x n`` token ids: seeded random ids, or the first ``n`` tokens of ``text`` (the
    content of the file ``text_name``) through the checkpoint's tokenizer."""
    import torch

    if text is None:
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, vocab, (1, n), generator=g), f"random ids, seed {seed}"
    content = text
    import transformers

    with _quiet_transformers(transformers):
        try:
            tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # OSError/ValueError/... for a broken tokenizer
            raise ValueError(f"--text: no usable tokenizer in {path!r}: {exc}") from exc
    ids = tok(content)["input_ids"]
    if not ids and content.strip():
        raise ValueError(f"--text: the tokenizer in {path!r} turned {len(content)} characters "
                         "into 0 tokens: it is not a working tokenizer for this text")
    if len(ids) < n:
        raise ValueError(f"--text: {text_name!r} has {len(ids)} tokens, the length {n} needs "
                         "more")
    return torch.tensor([ids[:n]]), f"text {os.path.basename(text_name)} through the tokenizer"


def _check_tokenizer_files(path: str) -> None:
    if not any(os.path.isfile(os.path.join(path, f)) for f in _TOKENIZER_FILES):
        names = ", ".join(_TOKENIZER_FILES[:4])
        raise ValueError(f"--text: {path!r} has no tokenizer files ({names}, ...): --text "
                         "needs the checkpoint's own tokenizer (without --text, --measure "
                         "uses random token ids)")


def _attention_modules(model: Any, is_t5: bool) -> list[tuple[int, Any]]:
    found: dict[int, Any] = {}
    for name, mod in model.named_modules():
        cls = type(mod).__name__
        if is_t5:
            m = re.search(r"decoder\.block\.(\d+)\.layer\.0\.SelfAttention$", name)
        else:
            if not cls.endswith("Attention") or "cross" in name.lower() or "encoder" in name:
                continue
            m = re.search(r"\.(\d+)\.[A-Za-z_]+$", name)
        if m is None:
            continue
        layer = int(m.group(1))
        if layer in found:
            raise ValueError(f"cannot tell the attention module of layer {layer} apart "
                             f"({type(found[layer]).__name__}, {cls})")
        found[layer] = mod
    if not found:
        raise ValueError("no self-attention modules found in the model")
    return sorted(found.items())


def _prior_for(model: ModelPriors, layer: int, head: int) -> HeadPrior:
    for p in model.heads:
        if p.covers(layer, head):
            return p
    raise ValueError(f"no prior for layer {layer}, head {head}")


def _layer_rows(weights: Any, layer: int, n: int, window: int, model_priors: ModelPriors,
                cache: dict[Any, RowPrior], threads: int) -> list[dict[str, Any]]:
    """The check of one layer's weights (``1 x H x n x n``), one record per head."""
    a = weights[0].detach().float().contiguous().numpy()
    priors = [_prior_for(model_priors, layer, h) for h in range(a.shape[0])]
    refused = [p for p in priors if p.eager_encoding is None]
    if refused:
        why = refused[0].refusal or "the prior needs the weights (tables)"
        return [{"length": n, "layer": layer, "head": h, "refused": why}
                for h in range(a.shape[0])]
    rows = []
    for p in priors:
        enc = p.eager_encoding
        if (enc, n) not in cache:
            cache[(enc, n)] = row_prior(enc, n, window)
        rows.append(cache[(enc, n)])
    out = check_layer(a, rows, window, threads=threads)
    for h, (rec, p) in enumerate(zip(out, priors, strict=True)):
        rec.update(length=n, layer=layer, head=h,
                   prior="eager" if p.measured_encoding is not None else "checkpoint")
        if p.temperature is not None:
            rec["temperature"] = p.temperature.at(n)
    return out


def _run(model: Any, ids: Any, is_t5: bool, modules: list[tuple[int, Any]],
         check: Any) -> None:
    """One forward pass with a hook on every attention module calling ``check``."""
    import torch

    done: list[int] = []

    def hook(layer: int, output: Any) -> None:
        # (attn_output, attn_weights), or T5's (attn_output, position_bias, attn_weights)
        weights = output[-1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is None or not torch.is_tensor(weights) or weights.dim() != 4:
            raise ValueError(f"layer {layer}: the attention module returned no weights")
        check(layer, weights)
        done.append(layer)

    handles = [m.register_forward_hook(lambda _m, _a, o, layer=layer: hook(layer, o))
               for layer, m in modules]
    try:
        with torch.no_grad():
            if is_t5:
                model(input_ids=ids[:, : min(ids.shape[1], 16)], decoder_input_ids=ids,
                      use_cache=False)
            else:
                model(input_ids=ids, use_cache=False)
    finally:
        for hd in handles:
            hd.remove()
    if len(done) != len(modules):
        raise ValueError(f"only {len(done)} of {len(modules)} attention layers reported "
                         "weights")


def measure(
    path: str,
    model_priors: ModelPriors,
    lengths: list[int],
    window: int,
    *,
    text: str | None = None,
    text_name: str = "text",
    seed: int = 0,
    threads: int = 2,
    progress: Callable[[str], None] | None = None,
) -> Measurement:
    """Run the checkpoint at each length and check every head (see the module docstring).

    ``text``: the content to tokenize (``text_name`` its file) instead of random ids;
    ``progress`` receives one line per layer checked, ``threads`` splits each layer's heads
    (``priors.diagnose.checks.check_layer``)."""
    if min(lengths) < window:
        raise ValueError(f"--measure-length must be >= window = {window}")
    is_t5 = model_priors.model_type in T5_FAMILIES
    if text is not None and os.path.isdir(path):
        _check_tokenizer_files(path)
    model = _load(path, is_t5)
    cfg = model.config
    max_pos = next((getattr(cfg, k) for k in ("max_position_embeddings", "n_positions",
                                               "max_seq_len") if getattr(cfg, k, None)), None)
    if max_pos is not None and not is_t5 and max(lengths) > int(max_pos):
        raise ValueError(f"--measure-length {max(lengths)} exceeds the model's maximum "
                         f"positions {max_pos}")
    modules = _attention_modules(model, is_t5)
    out = Measurement(window, sorted(lengths), "")
    cache: dict[Any, RowPrior] = {}
    for n in sorted(lengths):
        ids, out.source = _tokens(path, n, text, text_name, seed, int(cfg.vocab_size))
        t0 = time.perf_counter()

        def check(layer: int, weights: Any, n: int = n, t0: float = t0) -> None:
            out.rows.extend(_layer_rows(weights, layer, n, window, model_priors, cache,
                                        threads))
            if progress is not None:
                progress(f"l = {n}: layer {layer + 1}/{len(modules)} checked "
                         f"({time.perf_counter() - t0:.1f} s)")

        _run(model, ids, is_t5, modules, check)
    return out
