"""Symbolic (sympy) verification: the scale-invariant prior of docs/theory.md §4, and the
class of an encoding (docs/theory.md §5) by sympy's convergence test of its summand.

sympy is imported inside the functions only: ``import priors.symbolic`` is free.

The class (``classify(enc, symbolic=True)``, ``symbolic_label``): a limit comparison of
the summand ``e^{b(d)}`` with ``(1+d)^-2``, then sympy's ``Sum.is_convergent``, checked
against the closed form ``Encoding.classify()`` (the value type is
``priors.classify.Classification``).

The claim verified: with ``a = 1 - rho`` (so ``0 < a <= 1``; the symbol is declared
positive), ``kappa = rho/(1 - rho)``,

    f(y) = (ln 1/y)^(-rho) / Gamma(1 - rho),     F(y) = (ln 1/y)^(1-rho) / Gamma(2 - rho),
    Z(1) = Gamma(1 - rho) Gamma(2 - rho)^kappa,  M(q) = P(1 - rho, -ln(1 - q)),

the self-similar solution ``a(t,s) = f(s/t)/t``, ``C(t,s) = F(s/t)``, ``Z(t) = t Z(1)``
satisfies the continuum fixed point exactly. Each entry of the returned dictionary is a
residual that sympy simplifies to 0:

``normalisation``
    ``int_0^1 f(y) dy - 1``, computed as ``int_0^oo f(e^-u) e^-u du - 1`` (``y = e^-u``;
    sympy cannot do the ``y``-integral for symbolic ``rho``, the substitution is exact).
``F_integral``
    ``int_y^1 f(x)/x dx - F(y)`` as ``int_0^L f(e^-u) du - F(e^-L)`` (``x = e^-u``,
    ``dx/x = -du``, ``L = ln 1/y > 0``). This is also ``C(t,s) = int_s^t a(u,s) du``.
``F_derivative``, ``F_at_one``
    ``F'(y) + f(y)/y`` and ``F(1)``, directly in ``y`` with no substitution: together an
    independent proof of the previous line.
``fixed_point_constant``
    ``d/dy [f(y) F(y)^kappa]``: the product is constant, so ``a C^kappa`` depends on the row only.
``fixed_point_value``
    ``f F^kappa Z(1) - 1``: the constant is ``1/Z(1)``, i.e. ``a(t,s) C(t,s)^kappa = 1/Z(t)``.
``window_mass_derivative``, ``window_mass_at_zero``
    ``M'(q) - f(1 - q)`` and ``M(0)``: ``M(q) = int_{1-q}^1 f(y) dy``.
``window_asymptotic``
    ``lim_{q->0} M'(q) / A'(q) - 1`` with ``A(q) = q^(1-rho)/Gamma(2-rho)``; with
    ``M(0) = A(0) = 0`` (``asymptotic_at_zero``) this is l'Hopital's rule for
    ``M(q) ~ A(q)``. (sympy's direct ``limit(M/A)`` for symbolic ``rho`` returns 0, which is
    wrong: it already gets ``limit(lowergamma(a, x)/x**a, x, 0)`` wrong. For rational
    ``rho`` it is right, see ``window_asymptotic_rho_half``.)
``window_asymptotic_rho_half``
    ``lim_{q->0} M(q)/A(q) - 1`` at ``rho = 1/2`` directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from priors.classify import Classification

if TYPE_CHECKING:  # pragma: no cover
    import sympy

    from priors.encodings.base import Encoding

__all__ = [
    "classify",
    "prior_expressions",
    "residuals",
    "simplify_residual",
    "symbolic_label",
    "verify_scale_invariant_prior",
]


def prior_expressions() -> dict[str, Any]:
    """Symbols and closed forms of docs/theory.md §4 as sympy objects.

    Keys: symbols ``a`` (``= 1 - rho``, positive), ``rho``, ``kappa``, ``y``, ``u``, ``L``, ``q``,
    ``X`` (all positive) and expressions ``f``, ``F`` (in ``y``), ``Z1`` (``Z(1)``), ``M`` and
    ``A`` (the asymptotic, in ``q``). Replace an entry to check another candidate with
    ``residuals``.
    """
    import sympy as sp

    a = sp.Symbol("a", positive=True)
    y, u, big_l, q, x_pos = sp.symbols("y u L q X", positive=True)
    rho = 1 - a
    kappa = rho / (1 - rho)
    return {
        "a": a,
        "rho": rho,
        "kappa": kappa,
        "y": y,
        "u": u,
        "L": big_l,
        "q": q,
        "X": x_pos,
        "f": sp.log(1 / y) ** (-rho) / sp.gamma(1 - rho),
        "F": sp.log(1 / y) ** (1 - rho) / sp.gamma(2 - rho),
        "Z1": sp.gamma(1 - rho) * sp.gamma(2 - rho) ** kappa,
        "M": sp.lowergamma(1 - rho, -sp.log(1 - q)) / sp.gamma(1 - rho),
        "A": q ** (1 - rho) / sp.gamma(2 - rho),
    }


def simplify_residual(expr: sympy.Expr, syms: dict[str, Any]) -> sympy.Expr:
    """Simplify a residual on the domain ``0 < y < 1``, ``0 < q < 1``.

    The domain is encoded exactly by ``y = e^-L`` and ``q = 1 - e^-X`` with ``L, X > 0``
    (positive symbols), so ``ln 1/y = L`` and ``-ln(1-q) = X`` are known positive and
    powers of them combine without forcing anything; then ``gammasimp`` and ``simplify``.
    """
    import sympy as sp

    x_pos = syms["X"]
    out = expr.subs({syms["y"]: sp.exp(-syms["L"]), syms["q"]: 1 - sp.exp(-x_pos)})
    out = sp.powsimp(sp.gammasimp(out))
    return sp.simplify(out)


def residuals(expr: dict[str, Any]) -> dict[str, sympy.Expr]:
    """Simplified residuals of every identity listed in the module docstring for ``expr``
    (as returned by ``prior_expressions``, possibly with entries replaced)."""
    import sympy as sp

    y, u, big_l, q, x_pos = expr["y"], expr["u"], expr["L"], expr["q"], expr["X"]
    f, big_f, kappa = expr["f"], expr["F"], expr["kappa"]
    f_u = f.subs(y, sp.exp(-u))  # f(e^-u); log(1/e^-u) = u for positive u
    big_f_l = big_f.subs(y, sp.exp(-big_l))
    m, asym = expr["M"], expr["A"]

    def limit_at_zero(ratio: sympy.Expr) -> sympy.Expr:
        # q -> 0+ is X -> 0+ under q = 1 - e^-X
        return sp.limit(simplify_residual(ratio, expr), x_pos, 0, "+")

    raw = {
        "normalisation": sp.integrate(f_u * sp.exp(-u), (u, 0, sp.oo)) - 1,
        "F_integral": sp.integrate(f_u, (u, 0, big_l)) - big_f_l,
        "F_derivative": sp.diff(big_f, y) + f / y,
        "F_at_one": big_f.subs(y, 1),
        "fixed_point_constant": sp.diff(f * big_f**kappa, y),
        "fixed_point_value": f * big_f**kappa * expr["Z1"] - 1,
        "window_mass_derivative": sp.diff(m, q) - f.subs(y, 1 - q),
        "window_mass_at_zero": m.subs(q, 0),
        "asymptotic_at_zero": asym.subs(q, 0),
        "window_asymptotic": limit_at_zero(sp.diff(m, q) / sp.diff(asym, q)) - 1,
        "window_asymptotic_rho_half": limit_at_zero(
            (m / asym).subs(expr["a"], sp.Rational(1, 2))
        )
        - 1,
    }
    return {name: simplify_residual(value, expr) for name, value in raw.items()}


def verify_scale_invariant_prior() -> dict[str, sympy.Expr]:
    """Residuals of the §4 identities for the closed forms of docs/theory.md; all simplify to 0.

    >>> res = verify_scale_invariant_prior()
    >>> sorted(name for name, r in res.items() if r != 0)
    []
    """
    return residuals(prior_expressions())


# ----------------------------------------------------- the class of an encoding (§5)


def symbolic_label(enc: Encoding) -> str:
    """``"summable"`` or ``"dilutes"`` from sympy's convergence test of ``sum e^{b(d)}``.

    Parameters are converted to exact rationals (floats are dyadic, so exactly). Imports
    sympy (only here).
    """
    import sympy

    d = sympy.Symbol("d", integer=True, nonnegative=True)
    summand = enc.sympy_summand(d)
    # limit comparison with the convergent p-series (1+d)^-2 first (decides the
    # faster-than-any-power families, where Sum.is_convergent can run away), then
    # sympy's own tests (p-series, geometric, ...)
    x = sympy.Symbol("x", positive=True)
    ratio = sympy.limit(summand.subs(d, x) * (x + 1) ** 2, x, sympy.oo)
    if ratio.is_finite:
        return "summable"
    convergent = sympy.Sum(summand, (d, 0, sympy.oo)).is_convergent()
    if convergent is sympy.true or convergent is True:
        return "summable"
    if convergent is sympy.false or convergent is False:
        return "dilutes"
    raise ValueError(f"sympy could not decide the convergence of {summand}")  # pragma: no cover


def classify(enc: Encoding, *, symbolic: bool = False) -> Classification:
    """The class of ``enc`` (docs/theory.md §5).

    ``symbolic=False``: the encoding's closed-form (or numeric) classification.
    ``symbolic=True``: additionally run sympy's convergence test on ``e^{b(d)}`` for the
    closed-form families; the result is marked ``method="symbolic"`` and a disagreement
    with the closed-form label raises ``RuntimeError`` (it would be a bug).
    """
    base = enc.classify()
    if not symbolic:
        return base
    label = symbolic_label(enc)
    if label != base.label:
        raise RuntimeError(  # pragma: no cover - a bug either here or in sympy
            f"sympy says {label}, the closed form says {base.label} for {enc!r}"
        )
    evidence = dict(base.evidence)
    evidence["sympy"] = f"Sum(e^b(d), (d, 0, oo)).is_convergent() -> {label == 'summable'}"
    return Classification(base.label, base.rate, evidence, "symbolic")
