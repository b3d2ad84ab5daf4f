"""``--measure``: run the checkpoint and check Theorem 3 on its attention (docs/theory.md §5).

Imports torch and transformers (so it is imported only for ``--measure``). The model is
loaded from the local directory (``local_files_only``, ``HF_HUB_OFFLINE=1``) with
``attn_implementation="eager"``, whose attention modules return their softmax weights. A
forward hook on each causal self-attention module (decoder-only: every layer's attention;
T5 family: the decoder's ``SelfAttention``) reads that layer's weights ``a`` (shape
``1 x H x n x n``), reduces them to per-head numbers and drops them: one layer's attention
is in memory at a time (rows are processed in chunks of ``ROW_CHUNK``).

Per head and per row ``l >= W`` (query position ``l``, keys at distances ``d = 0..l-1``,
masked keys of a sliding window excluded):

* measured window mass ``M = sum_{d<W} a_d / sum_d a_d`` (float64 sums of the model's
  weights);
* content-score spread: the logits are ``z_d = log a_d + c_l`` (softmax is invariant to a
  row constant ``c_l``, and ``log`` inverts ``exp`` wherever ``a_d > 0``), so the content
  scores ``s_d = z_d - b(d)`` are known up to that constant and the smallest ``B`` with
  ``|s_d - c| <= B`` for some ``c`` is ``B_l = (max_d s_d - min_d s_d) / 2``. Rows with a
  weight that underflowed to 0 have no finite logit there and are not checked (counted);
* Theorem 3's bracket for that ``B_l`` with the exact prior sums ``S_W`` and ``T_l``
  (``Encoding.weight_sum``, the tail summed directly):
  ``S_W / (S_W + e^{2B} T) <= M <= e^{2B} S_W / (e^{2B} S_W + T)``.
  The bracket must hold for every row (it is attained, so it is also tight). Inside means
  within the relative tolerance ``RTOL``: float32 weights carry a relative error of a few
  units of 2^-24 each, which moves ``M`` and ``B_l`` by far less than 1e-5.

Because ``B_l`` is estimated from the same row, the bracket holds for any prior whose exact
sums agree with its bias values: a violation can only come from a prior whose sums
disagree with the bias it claims (a perturbed prior: the tests' negative control), from
weights that are not a softmax over exactly these keys, or from numerical failure. So the
check tests the chain "model weights -> our bias values -> our exact prior sums ->
Theorem 3" end to end; whether our bias is the one the model applies is tested separately
against the models' own bias tensors (tests/priors/test_diagnose_models.py).

The bias subtracted is the one transformers' eager code applies (``HeadPrior.eager_encoding``;
for Falcon-ALiBi twice the checkpoint's slope, see ``priors.diagnose.families``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from priors.diagnose.families import T5_FAMILIES, HeadPrior, ModelPriors

__all__ = ["ROW_CHUNK", "RTOL", "Measurement", "bracket_check", "measure", "prior_log_sums"]

#: Relative tolerance of the bracket check (float32 weights; see the module docstring).
RTOL = 1e-5
#: Rows processed at once (bounds the float64 work arrays to ROW_CHUNK x n per head).
ROW_CHUNK = 256


@dataclass
class Measurement:
    """Per (length, layer, head) measured masses beside the prior's, and the check totals."""

    window: int
    lengths: list[int]
    source: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_checked(self) -> int:
        return sum(r["rows_checked"] for r in self.rows)

    @property
    def rows_outside(self) -> int:
        return sum(r["rows_outside"] for r in self.rows)

    @property
    def rows_underflow(self) -> int:
        return sum(r["rows_underflow"] for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        """The totals, the precision and the per-row numbers, JSON-ready."""
        return {
            "window": self.window,
            "lengths": self.lengths,
            "tokens": self.source,
            "rows_checked": self.rows_checked,
            "rows_outside": self.rows_outside,
            "rows_underflow": self.rows_underflow,
            "all_inside": self.rows_outside == 0,
            "rtol": RTOL,
            "precision": "measured masses: float64 sums of the model's float32 weights "
            "(relative error ~1e-6); prior masses: exact (mpmath), shown to 17 digits",
            "heads": self.rows,
        }

    def to_json(self, **json_kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **json_kwargs)``."""
        return json.dumps(self.to_dict(), **json_kwargs)

    def to_text(self, digits: int = 6) -> list[str]:
        lines = [
            f"measured (tokens: {self.source}; eager attention; W = {self.window}; measured "
            f"masses ~1e-6 relative (float32 weights), prior masses exact):",
        ]
        header = ["l", "layer", "head", "M meas", "M prior", "D meas", "D prior", "B max",
                  "B median", "rows", "outside"]
        table = []
        for r in self.rows:
            table.append([
                str(r["length"]), str(r["layer"]), str(r["head"]),
                f"{r['measured_window_mass']:.{digits}g}", f"{r['prior_window_mass']:.{digits}g}",
                f"{r['measured_distant_mass']:.{digits}g}",
                f"{r['prior_distant_mass']:.{digits}g}",
                f"{r['spread_max']:.4g}", f"{r['spread_median']:.4g}",
                str(r["rows_checked"]), str(r["rows_outside"]),
            ])
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines.append("  " + fmt.format(*header))
        lines += ["  " + fmt.format(*t) for t in table]
        if any(r.get("prior") == "eager" for r in self.rows):
            lines.append("  (M/D prior: the prior transformers' eager code applies, which differs "
                         "from the checkpoint's here; see the notes above)")
        verdict = ("all inside" if self.rows_outside == 0
                   else f"{self.rows_outside} OUTSIDE")
        lines.append(
            f"Theorem 3 bracket for each row's own content spread B_l: {self.rows_checked} rows "
            f"checked, {verdict} (relative tolerance {RTOL:g}); {self.rows_underflow} rows "
            "not checked (a weight underflowed to 0)"
        )
        return lines


def prior_log_sums(enc: Any, n: int, w: int) -> tuple[float, np.ndarray]:
    """``log S_W`` and ``log T_l`` for ``l = 1..n`` from the encoding's exact ``weight_sum``
    (mpmath, 20 digits, rounded to float64; ``log T_l = -inf`` for ``l <= W``).

    The sums come from ``weight_sum``, the bias values subtracted from the logits from
    ``bias``: the check compares the two (a prior whose sums disagree with its bias values
    fails it, which is the negative control of the tests).
    """
    import mpmath

    log_sw = float(mpmath.log(enc.weight_sum(0, w, dps=20)))
    log_t = np.full(n, -np.inf)
    for length in range(w + 1, n + 1):
        t = enc.weight_sum(w, length, dps=20)
        log_t[length - 1] = float(mpmath.log(t)) if t > 0 else -np.inf
    return log_sw, log_t


def bracket_check(
    weights: Any,
    enc: Any,
    window: int,
    *,
    rtol: float = RTOL,
    row_chunk: int = ROW_CHUNK,
    sums: tuple[float, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Theorem 3 on one head: ``weights`` is its ``n x n`` causal attention (torch or numpy).

    Returns the last row's measured window/distant mass, the per-row spread ``B_l``
    (max, median), the number of rows checked (``l >= W``), outside the bracket, skipped
    for underflow, and the smallest relative slack to the bracket.
    """
    import torch

    a_all = torch.as_tensor(weights)
    n = a_all.shape[-1]
    if a_all.shape != (n, n):
        raise ValueError(f"weights must be a square n x n matrix, got {tuple(a_all.shape)}")
    w = window
    if n < w:
        raise ValueError(f"length {n} is shorter than the window {w}")
    log_sw, log_t = prior_log_sums(enc, n, w) if sums is None else sums
    bias = torch.as_tensor(np.asarray(enc.bias(np.arange(n, dtype=np.float64)), dtype=np.float64))
    spreads: list[np.ndarray] = []
    checked = outside = underflow = 0
    min_slack = math.inf
    last_m = last_d = float("nan")
    j = torch.arange(n)
    for start in range(w - 1, n, row_chunk):
        rows = torch.arange(start, min(n, start + row_chunk))
        a = a_all[rows].to(torch.float64)  # (r, n)
        d = rows[:, None] - j[None, :]  # distance; negative above the diagonal
        dd = d.clamp(min=0)
        bd = bias[dd]
        valid = (d >= 0) & torch.isfinite(bd)
        av = torch.where(valid, a, torch.zeros(()))
        total = av.sum(1)
        win = torch.where(valid & (d < w), a, torch.zeros(())).sum(1)
        m_meas = (win / total).numpy()
        d_meas = (torch.where(valid & (d >= w), a, torch.zeros(())).sum(1) / total).numpy()
        zero = (valid & (a <= 0)).any(1).numpy()
        c = torch.log(a) - bd
        hi = torch.where(valid, c, torch.full((), -math.inf)).amax(1)
        lo = torch.where(valid, c, torch.full((), math.inf)).amin(1)
        spread = ((hi - lo) / 2).numpy()
        lt = log_t[rows.numpy()]  # log T_l at l = row + 1
        # M^- = 1/(1 + e^{2B} T/S_W), M^+ = 1/(1 + e^{-2B} T/S_W), in the log domain
        x = lt - log_sw
        with np.errstate(over="ignore", invalid="ignore"):
            m_lo = 1.0 / (1.0 + np.exp(np.minimum(2 * spread + x, 700.0)))
            m_hi = 1.0 / (1.0 + np.exp(np.minimum(x - 2 * spread, 700.0)))
        ok = ~zero
        checked += int(ok.sum())
        underflow += int(zero.sum())
        lo_ok = m_meas >= m_lo * (1 - rtol)
        hi_ok = m_meas <= m_hi * (1 + rtol)
        outside += int((ok & ~(lo_ok & hi_ok)).sum())
        if ok.any():
            slack = np.minimum(m_meas - m_lo, m_hi - m_meas)[ok] / np.maximum(m_meas[ok], 1e-300)
            min_slack = min(min_slack, float(slack.min()))
            spreads.append(spread[ok])
        last_m, last_d = float(m_meas[-1]), float(d_meas[-1])
    sp = np.concatenate(spreads) if spreads else np.array([math.nan])
    return {
        "measured_window_mass": last_m,
        "measured_distant_mass": last_d,
        "spread_max": float(np.max(sp)),
        "spread_median": float(np.median(sp)),
        "rows_checked": checked,
        "rows_outside": outside,
        "rows_underflow": underflow,
        "min_relative_slack": min_slack,
    }


def _prior_for(model: ModelPriors, layer: int, head: int) -> HeadPrior:
    for p in model.heads:
        if (p.layer is None or p.layer == layer) and (p.head is None or p.head == head):
            return p
    raise ValueError(f"no prior for layer {layer}, head {head}")


def _attention_modules(model: Any, is_t5: bool) -> list[tuple[int, Any]]:
    import re

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


def _tokens(path: str, n: int, text: str | None, seed: int, vocab: int) -> tuple[Any, str]:
    import torch

    if text is None:
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, vocab, (1, n), generator=g), f"random ids, seed {seed}"
    try:
        with open(text, encoding="utf-8") as fh:
            content = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--text: cannot read {text!r}: {exc}") from exc
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises OSError/ValueError/... without a tokenizer
        raise ValueError(f"--text: no usable tokenizer in {path!r}: {exc}") from exc
    ids = tok(content)["input_ids"]
    if len(ids) < n:
        raise ValueError(f"--text: {text!r} has {len(ids)} tokens, the length {n} needs more")
    return torch.tensor([ids[:n]]), f"text {os.path.basename(text)} through the tokenizer"


def measure(
    path: str,
    model_priors: ModelPriors,
    lengths: list[int],
    window: int,
    *,
    text: str | None = None,
    seed: int = 0,
    progress: TextIO | None = sys.stderr,
) -> Measurement:
    """Run the checkpoint at each length and check every head (see the module docstring)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ValueError("--measure needs torch and transformers "
                         "(pip install 'causal-ot-priors[hf]')") from exc
    from priors.mass import masses

    if not os.path.isdir(path):
        raise ValueError("--measure needs a model directory with weights, not a config file")
    if min(lengths) < window:
        raise ValueError(f"--measure-length must be >= window = {window}")
    is_t5 = model_priors.model_type in T5_FAMILIES
    auto = (transformers.AutoModelForSeq2SeqLM if is_t5 else transformers.AutoModelForCausalLM)
    transformers.logging.set_verbosity_error()
    try:
        model = auto.from_pretrained(path, local_files_only=True, attn_implementation="eager",
                                     dtype=torch.float32)
    except Exception as exc:  # OSError (no weights), ValueError, RuntimeError (shapes), ...
        raise ValueError(f"--measure: cannot load the model from {path!r}: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                         ) from exc
    model.eval()
    vocab = int(model.config.vocab_size)
    max_pos = getattr(model.config, "max_position_embeddings", None) or getattr(
        model.config, "n_positions", None) or getattr(model.config, "max_seq_len", None)
    if max_pos is not None and not is_t5 and max(lengths) > int(max_pos):
        raise ValueError(f"--measure-length {max(lengths)} exceeds the model's maximum "
                         f"positions {max_pos}")
    modules = _attention_modules(model, is_t5)
    out = Measurement(window, sorted(lengths), "")
    exact_cache: dict[tuple[Any, int], tuple[Any, ...]] = {}
    for n in sorted(lengths):
        ids, source = _tokens(path, n, text, seed, vocab)
        out.source = source
        t0 = time.perf_counter()
        current: dict[str, Any] = {}

        def hook(mod: Any, args: Any, output: Any, layer: int, n: int = n,
                 current: dict[str, Any] = current, t0: float = t0) -> None:
            # (attn_output, attn_weights), or T5's (attn_output, position_bias, attn_weights)
            weights = output[-1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None or not torch.is_tensor(weights) or weights.dim() != 4:
                raise ValueError(f"layer {layer}: the attention module returned no weights")
            a = weights[0].detach()
            for h in range(a.shape[0]):
                prior = _prior_for(model_priors, layer, h)
                enc = prior.eager_encoding
                if enc is None:
                    raise ValueError("--measure needs the prior tables (weights)")
                key = (enc, n)
                if key not in exact_cache:
                    _, _, m, d = masses(enc, window, n, dps=20)
                    exact_cache[key] = (float(m), float(d), prior_log_sums(enc, n, window))
                row = bracket_check(a[h], enc, window, sums=exact_cache[key][2])
                row.update(length=n, layer=layer, head=h, prior_window_mass=exact_cache[key][0],
                           prior_distant_mass=exact_cache[key][1],
                           prior="eager" if prior.measured_encoding is not None else "checkpoint")
                out.rows.append(row)
            current["done"] = current.get("done", 0) + 1
            if progress is not None:
                print(f"[measure] l = {n}: layer {layer + 1}/{len(modules)} "
                      f"({time.perf_counter() - t0:.1f} s)", file=progress, flush=True)

        handles = [m.register_forward_hook(lambda mod, a, o, layer=layer: hook(mod, a, o, layer))
                   for layer, m in modules]
        try:
            with torch.no_grad():
                if is_t5:
                    enc_ids = ids[:, : min(n, 16)]
                    model(input_ids=enc_ids, decoder_input_ids=ids, use_cache=False)
                else:
                    model(input_ids=ids, use_cache=False)
        finally:
            for hd in handles:
                hd.remove()
        if current.get("done", 0) != len(modules):
            raise ValueError(f"only {current.get('done', 0)} of {len(modules)} attention "
                             "layers reported weights")
    return out
