"""The shared interface of every positional prior (docs/theory.md §5).

An additive distance bias ``b(d)`` (``d = l - j >= 0``) is the prior
``pi_l(j) ∝ exp(b(l - j))`` of the entropic-OT view (docs/theory.md §1). Everything the
toolkit computes about it follows from one primitive, the prior mass on a range of
distances::

    weight_sum(lo, hi) = sum_{d=lo}^{hi-1} e^{b(d)}        (S_m = weight_sum(0, m))

With it, at query length ``l`` and content scores ``B = 0`` (docs/theory.md §5)::

    M_l(W) = S_W / (S_W + T),   D_l(W) = T / (S_W + T),   T = weight_sum(W, l),

both computed from the tail ``T`` itself, never as ``1 - M`` (no digits lost when the
distant mass is tiny), and ``M_inf(W) = S_W / S_inf`` (0 when ``S_inf = inf``).

Conventions (pinned in ``tests/priors/test_encodings.py``): the window of size ``W``
is the ``W`` keys at distances ``0 .. W-1``, the query itself included; the query at
position ``l`` sees the ``l`` keys ``j <= l`` (causal), i.e. distances ``0 .. l-1``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

import mpmath
import numpy as np

from priors.classify import Classification
from priors.harmonic import DEFAULT_DPS
from priors.precision import guarded
from priors.validation import as_count, as_float, check_dps, check_window_length

if TYPE_CHECKING:  # pragma: no cover
    import flint

__all__ = [
    "GUARD_DPS",
    "Encoding",
    "FewerDigitsWarning",
    "check_window_length",
    "finite_param",
    "positive_param",
]

#: Guard digits used inside the mass computations, rounded away at the end.
GUARD_DPS = 8


def finite_param(value: object, name: str) -> float:
    """A finite real parameter as ``float``; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    out = as_float(value, name)
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if out != value:  # exact comparison (Fraction, high-precision mpf): no silent rounding
        raise ValueError(
            f"{name} = {value!r} is not exactly a float64 (it would be read as {out!r}); "
            "pass a float"
        )
    return out


def positive_param(value: object, name: str, *, allow_zero: bool = False) -> float:
    """A finite parameter ``> 0`` (or ``>= 0`` with ``allow_zero``)."""
    out = finite_param(value, name)
    if out < 0 or (out == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return out


@guarded(GUARD_DPS)
def _share(part: mpmath.mpf, rest: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    """``part / (part + rest)`` (a mass from its two sums), ``dps`` digits."""
    return part / (part + rest)


@guarded(GUARD_DPS)
def _quotient(num: mpmath.mpf, den: mpmath.mpf, *, dps: int) -> mpmath.mpf:
    """``num / den``, ``dps`` digits."""
    return num / den


def _as_distances(d: object, length: int | None) -> tuple[np.ndarray, bool]:
    scalar = np.ndim(d) == 0
    try:
        arr = np.asarray(d, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"d must be real distances, got {d!r}") from exc
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("d must be finite distances >= 0")
    if length is not None and np.any(arr > length - 1):
        raise ValueError(f"d must be <= length - 1 = {length - 1} (keys j <= l)")
    return arr, scalar


@dataclass(frozen=True)
class Encoding(ABC):
    """A positional prior ``e^{b(d)}`` on distances ``d >= 0`` (docs/theory.md §5).

    Subclasses are frozen dataclasses whose ``__post_init__`` validates the parameters
    (``ValueError`` naming the argument) and implement ``_bias`` and ``weight_sum``.
    """

    #: Short name used by the command line and in reports.
    name: ClassVar[str] = "encoding"
    #: True when the prior depends on the query length ``l`` (causal-OT prior).
    length_dependent: ClassVar[bool] = False
    #: Correct significant digits the masses can carry (None: as many as ``dps``).
    max_digits: ClassVar[int | None] = None
    #: How ``_weight_sum_arb`` evaluates the sums in Arb, as ``priors.certified`` reports
    #: it; None: the encoding has no certified mode.
    arb_method: ClassVar[str | None] = None

    # -- parameters ------------------------------------------------------------------

    @property
    def params(self) -> dict[str, Any]:
        """The parameters as a JSON-friendly dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- the bias --------------------------------------------------------------------

    def bias(self, d: object, *, length: int | None = None) -> np.ndarray | float:
        """``b(d)`` in float64 for distances ``d >= 0`` (scalar in, float out)."""
        if length is not None:
            length = as_count(length, "length", minimum=1)
        if self.length_dependent and length is None:
            raise ValueError(f"length is required: the {self.name} prior depends on l")
        arr, scalar = _as_distances(d, length)
        out = np.asarray(self._bias(arr, length), dtype=np.float64)
        return float(out) if scalar else out

    @abstractmethod
    def _bias(self, d: np.ndarray, length: int | None) -> np.ndarray:
        """``b(d)`` for a validated float64 array of distances."""

    # -- prior masses ----------------------------------------------------------------

    @abstractmethod
    def _weight_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        """``sum_{d=lo}^{hi-1} e^{b(d)}`` with validated ``0 <= lo <= hi``, ``dps`` digits."""

    def _weight_sum_arb(self, lo: int, hi: int | None) -> flint.arb | None:
        """Ball enclosure of ``sum_{d=lo}^{hi-1} e^{b(d)}`` at the current Arb working
        precision (``hi=None``: ``S_inf``, or None when the prior is not summable), for
        validated ``0 <= lo <= hi``; the certified back end of the encodings that set
        ``arb_method`` (``priors.certified``)."""
        raise NotImplementedError(f"{self.name} has no certified (Arb) sums")

    def weight_sum(
        self, lo: int, hi: int, *, length: int | None = None, dps: int = DEFAULT_DPS
    ) -> mpmath.mpf:
        """Prior mass ``sum_{d=lo}^{hi-1} e^{b(d)}`` on the distances ``lo <= d < hi``.

        ``length`` is the query length ``l`` for length-dependent priors (then
        ``hi <= l``); stationary priors ignore it.
        """
        lo = as_count(lo, "lo")
        hi = as_count(hi, "hi")
        if hi < lo:
            raise ValueError(f"hi must be >= lo, got lo={lo}, hi={hi}")
        dps = check_dps(dps)
        if self.length_dependent:
            if length is None:
                raise ValueError(f"length is required: the {self.name} prior depends on l")
            length = as_count(length, "length", minimum=1)
            if hi > length:
                raise ValueError(f"hi must be <= length = {length}, got {hi}")
        return self._range_sum(lo, hi, length, dps)

    def _range_sum(self, lo: int, hi: int, length: int | None, dps: int) -> mpmath.mpf:
        """``weight_sum`` for arguments validated by the caller: the encoding's range check
        (``_check_range``), then the sum."""
        self._check_range(hi)
        return self._weight_sum(lo, hi, length, dps)

    def _check_range(self, hi: int) -> None:
        """Hook: reject distances the encoding cannot sum (``ValueError`` naming length)."""
        return None

    def partial_sum(
        self, m: int, *, length: int | None = None, dps: int = DEFAULT_DPS
    ) -> mpmath.mpf:
        """``S_m = sum_{d<m} e^{b(d)}`` (docs/theory.md §5), ``dps`` digits, O(1) in ``m`` where a
        closed form exists."""
        return self.weight_sum(0, m, length=length, dps=dps)

    def total_sum(self, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
        """``S_inf = sum_{d>=0} e^{b(d)}``; ``mpmath.inf`` when the prior is not summable."""
        return mpmath.inf

    def _mass_sums(self, w: int, n: int, dps: int) -> tuple[mpmath.mpf, mpmath.mpf]:
        """``(S_W, T)``, the two sums of every mass at window ``w`` and length ``n``, with
        ``GUARD_DPS`` guard digits, for ``1 <= w <= n`` and ``dps`` validated by the public
        caller (``window_mass``, ``priors.mass.mass_report``); warns when the encoding
        carries fewer digits than ``dps`` (naming the public caller's caller)."""
        self._warn_digits(dps)
        work = dps + GUARD_DPS
        lkw = n if self.length_dependent else None
        return self._range_sum(0, w, lkw, work), self._range_sum(w, n, lkw, work)

    def mass_digits(self, window: int, length: int, dps: int) -> int:
        """Correct significant digits of the masses at ``(W, l)`` computed at ``dps``:
        ``dps``, or ``max_digits`` for float64-backed encodings (overridden where the
        summation carries its own error bound)."""
        return dps if self.max_digits is None else min(dps, self.max_digits)

    def _warn_digits(self, dps: int) -> None:
        if self.max_digits is not None and dps > self.max_digits:
            warnings.warn(
                f"{self.name} masses carry about {self.max_digits} correct digits "
                f"(float64-backed), not dps={dps}",
                FewerDigitsWarning,
                stacklevel=4,  # past _mass_sums and the public method calling it
            )

    def window_mass(self, window: int, length: int, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
        """Exact window mass ``M_l(W) = S_W / S_l`` at ``B = 0`` (docs/theory.md §5)."""
        w, n = check_window_length(window, length)
        dps = check_dps(dps)
        s_w, tail = self._mass_sums(w, n, dps)
        return _share(s_w, tail, dps=dps)

    def distant_mass(self, window: int, length: int, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
        """Exact distant mass ``D_l(W) = (S_l - S_W) / S_l`` at ``B = 0``, from the tail sum
        (no subtraction ``1 - M``)."""
        w, n = check_window_length(window, length)
        dps = check_dps(dps)
        s_w, tail = self._mass_sums(w, n, dps)
        return _share(tail, s_w, dps=dps)

    @property
    def limit_known(self) -> bool:
        """Whether ``M_inf(W)`` is determined (False for a bias given on a finite range
        with no stated continuation)."""
        return True

    def limit_window_mass(self, window: int, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
        """``M_inf(W) = S_W / S_inf`` (docs/theory.md §5); 0 for a diluting prior."""
        return self._limit_window_mass(as_count(window, "window", minimum=1), check_dps(dps))

    def _limit_window_mass(self, w: int, dps: int) -> mpmath.mpf:
        """``limit_window_mass`` for a window and ``dps`` validated by the caller."""
        total = self.total_sum(dps=dps + GUARD_DPS)
        with mpmath.workdps(dps):
            if mpmath.isinf(total):
                return mpmath.mpf(0)
        s_w = self._range_sum(0, w, None, dps + GUARD_DPS)
        return _quotient(s_w, total, dps=dps)

    def limit_distant_mass(self, window: int, *, dps: int = DEFAULT_DPS) -> mpmath.mpf:
        """``D_inf(W) = 1 - M_inf(W)`` (1 for a diluting prior), from the tail when finite."""
        w = as_count(window, "window", minimum=1)
        dps = check_dps(dps)
        total = self.total_sum(dps=dps + GUARD_DPS)
        if mpmath.isinf(total):
            with mpmath.workdps(dps):
                return mpmath.mpf(1)
        tail = self._tail_from(w, dps + GUARD_DPS)
        return _quotient(tail, total, dps=dps)

    def _tail_from(self, w: int, dps: int) -> mpmath.mpf:
        """``sum_{d>=w} e^{b(d)}`` for a summable prior (override to avoid the subtraction)."""
        total = self.total_sum(dps=dps + GUARD_DPS)
        s_w = self._range_sum(0, w, None, dps + GUARD_DPS)
        with mpmath.workdps(dps + GUARD_DPS):
            return total - s_w

    # -- classification --------------------------------------------------------------

    @abstractmethod
    def classify(self) -> Classification:
        """Summable or dilutes, with the rate and the evidence (docs/theory.md §5)."""

    def sympy_summand(self, d: Any) -> Any:
        """``e^{b(d)}`` as a sympy expression in the symbol ``d`` (closed-form families)."""
        raise NotImplementedError(f"{self.name} has no symbolic summand")

    # -- what a mass report adds -------------------------------------------------------

    def series_brackets(
        self, window: int, length: int, *, dps: int
    ) -> dict[str, tuple[mpmath.mpf, mpmath.mpf]] | None:
        """Series brackets of the ``B = 0`` window mass ``M_l(W)`` (docs/theory.md §6), by
        method name, with ``dps`` digits and clipped to ``[0, 1]`` (a mass lies there);
        ``None`` for an encoding without them (``_series_brackets``)."""
        w, n = check_window_length(window, length)
        return self._series_brackets(w, n, check_dps(dps))

    def _series_brackets(
        self, w: int, n: int, dps: int
    ) -> dict[str, tuple[mpmath.mpf, mpmath.mpf]] | None:
        """``series_brackets`` for arguments validated by the caller; ``None`` here (the
        hook an encoding with series brackets overrides)."""
        return None

    def summation_note(self) -> str | None:
        """How the sums are formed, where that is more than a closed form a reader would
        assume (a truncation with a bound, an assumed tail); ``None`` by default."""
        return None


class FewerDigitsWarning(RuntimeWarning):
    """The masses carry fewer correct significant digits than ``dps`` asked for (a
    float64-backed sum, an error bound above ``10^-dps``); the digits they do carry are
    ``Encoding.mass_digits``."""
