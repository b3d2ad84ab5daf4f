r"""Triton kernels of the causal OT operator (docs/theory.md §2, Lemma 2.1): forward and backward.

Imported only where triton is installed (:mod:`._triton` loads it). Under
``TRITON_INTERPRET=1`` (triton's own switch, read when triton is first imported) the same
kernels run on CPU tensors in triton's interpreter; that is how the test suite runs them on
machines without a GPU.

Forward: one program per ``(batch, head)`` slice walks the rows in order. The slice's column
masses ``C[l-1, :]`` (``n`` values) stay in registers for the whole walk; a row reads its scores
once and writes its weights once, and everything in between is on chip. Row ``l`` (0-based
``i``; the keys ``j <= i`` with a finite score are live) solves, with the scores shifted by their
row max (Proposition 2.4) and ``kappa = rho/(1-rho)``,

    x_j + kappa log(C_j + e^{x_j}) = s_j - zeta,    sum_j e^{x_j} = 1

in ``x_j = log a_j`` and ``zeta = log Z_l`` (Lemma 2.1). The start: ``q_j = s_j - kappa log C_j``
on the keys with mass, ``zeta`` from three scalar Newton steps on
``log(e^{P - zeta} + sum_fresh e^{(1-rho)(s_f - zeta)}) = 0`` (``P = logsumexp q``; a fresh key,
``C_j = 0``, solves its equation exactly by ``x = (1-rho)(s - zeta)``), and
``x_j = min(q_j - zeta, (1-rho)(s_j - zeta))``, the upper bound of each key's root. Then the
joint Newton step on ``(x, zeta)``,

    g_j = 1 + kappa a_j/(C_j + a_j),  r_j = x_j + kappa log(C_j + a_j) + zeta - s_j,
    dzeta = (sum a - 1 - sum a_j r_j/g_j) / sum(a_j/g_j),  dx_j = -(r_j + dzeta)/g_j,

each iterate clamped to the upper bound at the new ``zeta``, until Newton's error bound (the
step, or ``4 step^3/step_prev^2`` once the steps shrink quadratically) is at most ``tol/10``:
a row's error moves the column masses of every later row, so rows aim below ``tol``. A row
whose steps stall at rounding level stops there (converged if the step is within ``tol``). A
row the joint iteration has not solved in ``fast_steps`` steps is finished by the safeguarded
nested iteration (per-key monotone Newton from the upper bound, bracketed Newton on ``zeta``)
within the rest of ``max_iter``. The weights are then polished by one per-key Newton step at
the final ``zeta`` and normalised. The compiled CPU kernel and the pure-torch solver
(``_newton``) solve the same equations with the same stopping rule.

Backward: the exact reverse row sweep. With ``D = C'`` the column masses after the row (a
cumulative sum of the weights, taken by the caller), ``p_j = a_j/(1 + kappa a_j/D_j)`` and the
column gradient ``G`` carried back from the later rows (in registers), rows in reverse:

    v_j = p_j (dL/da_j + G_j),  sbar_j = v_j - p_j sum(v)/sum(p),  G_j <- G_j - kappa sbar_j/D_j.

Statistics per slice (``stats[b]``): the largest Newton step count of a row, the largest error
bound, whether every row met ``tol``, and the first invalid row's code (1 NaN, 2 ``+inf``,
3 every key masked; the codes of ``_common.SCORE_VALUE_ERRORS``).
"""

from __future__ import annotations

import triton
import triton.language as tl

#: Slots of the per-slice statistics row the forward kernel writes (``.value`` in Python).
STAT_ITERS = tl.constexpr(0)
STAT_RESID = tl.constexpr(1)
STAT_OK = tl.constexpr(2)
STAT_BAD = tl.constexpr(3)
N_STATS = tl.constexpr(4)
#: Slots of the kernels' parameter vector, held in the compute dtype so that float64 runs
#: every scalar in float64: ``1 - rho``, ``kappa``, ``tol`` and the dtype's epsilon.
PARAM_OMR = tl.constexpr(0)
PARAM_KAPPA = tl.constexpr(1)
PARAM_TOL = tl.constexpr(2)
PARAM_EPS = tl.constexpr(3)


@triton.jit
def _sum3_max1(a1, b1, c1, d1, a2, b2, c2, d2):
    return a1 + a2, b1 + b2, c1 + c2, tl.maximum(d1, d2)


@triton.jit
def _sum2(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _sum3(a1, b1, c1, a2, b2, c2):
    return a1 + a2, b1 + b2, c1 + c2


@triton.jit
def _row_scan(a1, b1, c1, d1, e1, a2, b2, c2, d2, e2):
    return a1 + a2, b1 + b2, c1 + c2, tl.maximum(d1, d2), tl.minimum(e1, e2)


@triton.jit
def _log_add(lc, x):
    """``log(e^lc + e^x)`` for ``x`` finite and ``lc`` finite or ``-inf``."""
    hi = tl.maximum(lc, x)
    return hi + tl.log(1.0 + tl.exp(tl.minimum(lc, x) - hi))


@triton.jit
def _upper_root(t, log_c, old, live, omr, kappa, zero):
    """The upper bound ``min(t - kappa log C, (1-rho) t)`` of each key's root (0 on dead keys)."""
    x = tl.where(old, tl.minimum(t - kappa * tl.where(old, log_c, zero), omr * t), omr * t)
    return tl.where(live, x, zero)


@triton.jit
def _params(param_ptr):
    """``(1 - rho, kappa, tol, eps)`` from the parameter vector (slots ``PARAM_*``)."""
    return (tl.load(param_ptr + PARAM_OMR), tl.load(param_ptr + PARAM_KAPPA),
            tl.load(param_ptr + PARAM_TOL), tl.load(param_ptr + PARAM_EPS))


@triton.jit
def _store_stats(out, iters, resid, ok, bad):
    """One slice's statistics into ``out[STAT_*]``, in ``out``'s dtype."""
    dtype = out.dtype.element_ty
    tl.store(out + STAT_ITERS, iters.to(dtype))
    tl.store(out + STAT_RESID, resid.to(dtype))
    tl.store(out + STAT_OK, ok.to(dtype))
    tl.store(out + STAT_BAD, bad.to(dtype))


@triton.jit
def _evaluate(x, log_c, s, zeta, live, kappa, zero):
    """The row at ``(x, zeta)``: weights ``a = e^x``, ``1/g`` and the residuals ``r`` of the
    keys' equations (0 on dead keys)."""
    log_d = _log_add(log_c, x)
    a = tl.where(live, tl.exp(x), zero)
    ginv = 1.0 / (1.0 + kappa * tl.exp(x - log_d))
    r = tl.where(live, x + kappa * log_d + zeta - s, zero)
    return a, ginv, r


@triton.jit
def _after_pass(it, mdx, dz, step, bound, zeta, s_abs, tol, eps, n_fast):
    """After the evaluation at step ``it``: ``(code, step size, error bound)``; the step is
    the largest key move ``mdx`` or ``|dz|``, the code that of ``_stopping``, or 3 (to the
    safeguarded iteration) when ``n_fast`` steps are spent."""
    done = 0
    if it > 0:
        prev = step
        step = tl.maximum(mdx, tl.abs(dz))
        done, bound = _stopping(it, step, prev, zeta, s_abs, tol, eps)
    if (done == 0) & (it >= n_fast):
        done = 3
    return done, step, bound


@triton.jit
def _stopping(it, step, prev, zeta, s_abs, tol, eps):
    """The joint iteration's stopping rule after step ``it`` of size ``step`` (the one before:
    ``prev``): ``(code, error bound)``, code 1 when Newton's bound (the step, or
    ``4 step^3/prev^2`` once the steps shrink quadratically) is at most ``tol/10``, 2 when the
    steps stall at rounding level, 3 when the step is not finite, 0 to go on."""
    bound = step
    if (it > 1) & (step < 0.25 * prev) & (step < 0.0009765625):
        bound = tl.minimum(bound, 4.0 * step * step * (step / (prev * prev)))
    done = 0
    if bound <= 0.1 * tol:
        done = 1
    elif (step <= 16.0 * eps * (1.0 + tl.abs(zeta) + s_abs)) & (step >= 0.5 * prev):
        done = 2
    elif step != step:
        done = 3
    return done, bound


@triton.jit
def _invalid_code(n_nan, n_pinf, n_fin):
    """The row's code in ``SCORE_VALUE_ERRORS`` (0: valid)."""
    return tl.where(n_nan > 0, 1, tl.where(n_pinf > 0, 2, tl.where(n_fin == 0, 3, 0)))


@triton.jit
def _keys_at_zeta(x, log_c, s, zeta, live, kappa, tol, zero):
    """Each key's root at fixed ``zeta`` by monotone Newton from the upper bound ``x`` (at
    most 50 steps, until the largest is at most ``tol`` or the steps stop shrinking):
    ``(x, the last largest step)``."""
    inner = tl.sum(zero, axis=0) + float("inf")
    last = inner
    k = 0
    while (k < 50) & (inner > tol) & ((k < 2) | (inner < last)):
        log_d = _log_add(log_c, x)
        dx = tl.where(live, (x + kappa * log_d + zeta - s) / (1.0 + kappa * tl.exp(x - log_d)),
                      zero)
        x = x - dx
        last = inner
        inner = tl.max(tl.abs(dx), axis=0)
        k += 1
    return x, inner


@triton.jit
def _bracketed_zeta(zeta, u, slope, zlo, zhi, omr):
    """One safeguarded step on ``zeta`` from ``u = log sum_j a_j(zeta)`` (0 at the root) and
    its slope ``-u'`` in ``[1 - rho, 1]``: the bracket ``[zlo, zhi]`` narrowed by the slope
    bounds, Newton's step kept inside it (else the midpoint). ``(new zeta, zlo, zhi)``."""
    b1 = zeta + u
    b2 = zeta + u / omr
    zlo = tl.maximum(zlo, tl.minimum(b1, b2))
    zhi = tl.minimum(zhi, tl.maximum(b1, b2))
    new = zeta + u / slope
    if (new < zlo) | (new > zhi):
        new = 0.5 * (zlo + zhi)
    return new, zlo, zhi


@triton.jit
def _stall(bound, best, stall, zeta, eps):
    """Steps in a row that did not shrink at rounding level (the safeguarded loop stops at 3)."""
    if (bound >= best) & (bound <= 1e3 * eps * (1.0 + tl.abs(zeta))):
        stall += 1
    else:
        stall = 0
    return stall


@triton.jit
def _start_zeta(p_old, p_new, log_e, omr):
    """The row's starting ``zeta``: ``log(e^p_old + e^p_new)``, then three Newton steps on
    ``e^{p_old - zeta} + e^{log_e - (1 - rho) zeta} = 1`` (``omr = 1 - rho``)."""
    hi = tl.maximum(p_old, p_new)
    zeta = hi + tl.log(1.0 + tl.exp(tl.minimum(p_old, p_new) - hi))
    for _k in range(3):
        m_old = tl.exp(p_old - zeta)
        m_new = tl.exp(log_e - omr * zeta)
        tot = m_old + m_new
        zeta = zeta + tl.log(tot) * tot / (m_old + omr * m_new)
    return zeta


@triton.jit
def _row_start(s, log_c, old, fresh, omr, kappa, zero):
    """``zeta`` of the closed-form start: three scalar Newton steps on
    ``log(e^{P - zeta} + E e^{-(1-rho) zeta}) = 0``, ``E = sum_fresh e^{(1-rho) s_f}``.

    The shifted scores are at most 0, so the fresh keys' sums need no shift; ``q`` does.
    """
    q = s - kappa * tl.where(old, log_c, zero)
    qm = tl.max(tl.where(old, q, zero - float("inf")), axis=0)
    qm0 = tl.where(qm == -float("inf"), 0.0, qm)
    s_old, s_new, e_new = tl.reduce((tl.where(old, tl.exp(q - qm0), zero),
                                     tl.where(fresh, tl.exp(s), zero),
                                     tl.where(fresh, tl.exp(omr * s), zero)), 0, _sum3)
    p_old = qm0 + tl.log(s_old)
    p_new = tl.log(s_new)
    log_e = tl.log(e_new)
    return _start_zeta(p_old, p_new, log_e, omr)


@triton.jit
def _forward_kernel(
    s_ptr, w_ptr, stats_ptr, param_ptr,
    n, stride_b, stride_r, max_iter, fast_steps,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    in_n = offs < n
    s_base = s_ptr + b.to(tl.int64) * stride_b
    w_base = w_ptr + b.to(tl.int64) * stride_b
    omr, kappa, tol, eps = _params(param_ptr)
    zero = tl.zeros([BLOCK], dtype=w_ptr.dtype.element_ty)
    izero = tl.zeros([BLOCK], dtype=tl.int32)
    zs = tl.sum(zero, axis=0)  # a scalar 0 of the compute dtype
    inf = zs + float("inf")
    col = zero  # C[l-1, :]: the column masses of the rows solved so far
    iters_max = 0
    resid_max = zs
    all_ok = 1
    bad = 0
    n_fast = tl.minimum(fast_steps, max_iter)
    for i in range(0, n):
        causal = offs <= i
        raw = tl.load(s_base + i * stride_r + offs, mask=causal, other=-float("inf"))
        fin = causal & (raw == raw) & (tl.abs(raw) < inf)
        n_nan, n_pinf, n_fin, rmax, rmin = tl.reduce(
            (tl.where(causal & (raw != raw), 1, izero), tl.where(causal & (raw == inf), 1, izero),
             tl.where(fin, 1, izero), tl.where(fin, raw, -inf), tl.where(fin, raw, inf)),
            0, _row_scan)
        if bad == 0:
            bad = _invalid_code(n_nan, n_pinf, n_fin)
        rmax = tl.where(n_fin > 0, rmax, zs)
        shifted = raw - rmax
        live = fin & (shifted > -inf)  # a difference that overflows: weight below any float
        s = tl.where(live, shifted, zero)
        s_abs = tl.where(n_fin > 0, tl.minimum(rmax - rmin, inf), zs)
        old = live & (col > 0.0)
        fresh = live & (col <= 0.0)
        log_c = tl.where(old, tl.log(tl.where(old, col, zero + 1.0)), -inf)
        zeta = _row_start(s, log_c, old, fresh, omr, kappa, zero)
        x = _upper_root(s - zeta, log_c, old, live, omr, kappa, zero)
        # The joint Newton iteration on (x, zeta). Each pass evaluates the row at the current
        # iterate and, in the same reduction, the size of the step that led to it, so a pass
        # costs one reduction; the stopping rule looks at that step before taking the next.
        step = inf
        bound = inf
        dz = zs
        dxv = zero
        done = 0
        it = 0
        log_d = log_c
        ginv = zero
        r = zero
        while done == 0:
            a, ginv, r = _evaluate(x, log_c, s, zeta, live, kappa, zero)
            ag = a * ginv
            sa, sagr, sag, mdx = tl.reduce((a, ag * r, ag, tl.abs(dxv)), 0, _sum3_max1)
            done, step, bound = _after_pass(it, mdx, dz, step, bound, zeta, s_abs, tol, eps,
                                            n_fast)
            if done == 0:
                dz = (sa - 1.0 - sagr) / sag
                zeta = zeta + dz
                xn = tl.minimum(x - (r + dz) * ginv,
                                _upper_root(s - zeta, log_c, old, live, omr, kappa, zero))
                dxv = xn - x
                x = xn
                it += 1
        ok = (done == 1) | ((done == 2) & (step <= tol))
        if done == 3:
            if max_iter > n_fast:
                # the safeguarded nested iteration from the last finite zeta
                zeta = tl.where((zeta == zeta) & (tl.abs(zeta) < inf), zeta, zs)
                zlo = -inf
                zhi = inf
                x = _upper_root(s - zeta, log_c, old, live, omr, kappa, zero)
                best = inf
                stall = 0
                bound = inf
                it2 = 0
                while (it2 < max_iter - n_fast) & (bound > tol) & (stall < 3):
                    x, inner = _keys_at_zeta(x, log_c, s, zeta, live, kappa, tol, zero)
                    log_d = _log_add(log_c, x)
                    g = 1.0 + kappa * tl.exp(x - log_d)
                    xm = tl.max(tl.where(live, x, -inf), axis=0)
                    u = xm + tl.log(tl.sum(tl.where(live, tl.exp(x - xm), zero), axis=0))
                    slope = tl.sum(tl.where(live, tl.exp(x - u) / g, zero), axis=0)
                    new, zlo, zhi = _bracketed_zeta(zeta, u, slope, zlo, zhi, omr)
                    dz = new - zeta
                    zeta = new
                    x = tl.where(live, x - dz / g, zero)
                    bound = tl.maximum(tl.abs(dz), inner)
                    stall = _stall(bound, best, stall, zeta, eps)
                    best = tl.minimum(best, bound)
                    it2 += 1
                it = it + it2
                ok = bound <= tol
            else:
                ok = step <= tol
            a, ginv, r = _evaluate(x, log_c, s, zeta, live, kappa, zero)
        # one per-key Newton step at the final zeta (from the last evaluation), then normalise;
        # x = log a <= 0 up to the step, so the exponentials need no shift
        x = x - r * ginv
        e = tl.where(live, tl.exp(x), zero)
        a = e / tl.sum(e, axis=0)
        tl.store(w_base + i * stride_r + offs, a, mask=in_n)
        col = col + a
        iters_max = tl.maximum(iters_max, it)
        resid_max = tl.where(bound == bound, tl.maximum(resid_max, bound), inf)
        if not ok:
            all_ok = 0
    _store_stats(stats_ptr + b * N_STATS, iters_max, resid_max, all_ok, bad)


@triton.jit
def _backward_kernel(
    a_ptr, cp_ptr, g_ptr, out_ptr, param_ptr,
    n, stride_b, stride_r,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    in_n = offs < n
    base = b.to(tl.int64) * stride_b
    kappa = tl.load(param_ptr + PARAM_KAPPA)
    zero = tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty)
    carried = zero  # G: dL/dC[l-1, :] carried back from the rows after l
    for k in range(0, n):
        i = n - 1 - k
        row = base + i * stride_r + offs
        causal = offs <= i
        a = tl.load(a_ptr + row, mask=causal, other=0.0)
        d = tl.load(cp_ptr + row, mask=causal, other=1.0)
        g = tl.load(g_ptr + row, mask=causal, other=0.0)
        pos = causal & (a > 0.0)
        d = tl.where(pos, d, zero + 1.0)
        p = tl.where(pos, a / (1.0 + kappa * a / d), zero)
        v = p * (g + carried)
        sum_v, sum_p = tl.reduce((v, p), 0, _sum2)
        sbar = v - p * (sum_v / sum_p)
        tl.store(out_ptr + row, sbar, mask=in_n)
        carried = carried - kappa * sbar / d


@triton.jit
def _online_add(m, total, v, mask, zero):
    """Running ``(max, sum e^{v - max})`` of a log-sum-exp, updated with one chunk."""
    cm = tl.max(tl.where(mask, v, zero - float("inf")), axis=0)
    new = tl.maximum(m, cm)
    new0 = tl.where(new == -float("inf"), 0.0, new)
    total = total * tl.exp(m - new0) + tl.sum(tl.where(mask, tl.exp(v - new0), zero), axis=0)
    return new, total


@triton.jit
def _chunk_live(s_row, offs, m, rmax):
    """``(in the row, live, raw scores)`` at keys ``offs`` of a long row: live keys have a
    finite score that does not underflow against the row maximum ``rmax``."""
    mk = offs < m
    raw = tl.load(s_row + offs, mask=mk, other=-float("inf"))
    live = mk & (raw == raw) & (tl.abs(raw) < float("inf")) & (raw - rmax > -float("inf"))
    return mk, live, raw


@triton.jit
def _chunk(s_row, col, offs, m, rmax, zero):
    """A chunk of a long row at keys ``offs``: ``(in the row, live, shifted scores, has mass,
    log C)``, as ``_forward_kernel`` makes them for a whole row."""
    mk, live, raw = _chunk_live(s_row, offs, m, rmax)
    cc = tl.load(col + offs, mask=mk, other=0.0)
    s = tl.where(live, raw - rmax, zero)
    old = live & (cc > 0.0)
    log_c = tl.where(old, tl.log(tl.where(old, cc, zero + 1.0)), -float("inf"))
    return mk, live, s, old, log_c


@triton.jit
def _chunked_row(
    s_row, col, x_buf, r_buf, g_buf, w_row, m,
    omr, kappa, tol, eps, max_iter, fast_steps,
    BLOCK: tl.constexpr,
):
    """Row of ``m`` keys solved in chunks of ``BLOCK`` (docs/theory.md §2, Lemma 2.1).

    The algorithm of ``_forward_kernel``, for rows longer than a program holds: the row's
    scores ``s_row`` and column masses ``col`` are read from memory at every pass, the
    iterate ``x`` and the last evaluation's ``r`` and ``1/g`` kept in the scratch rows
    ``x_buf``, ``r_buf``, ``g_buf``; one pass per Newton step applies the previous step and
    evaluates the next. Writes the weights to ``w_row[:m]``, adds them to ``col[:m]``, and
    returns ``(Newton steps, error bound, met tol, invalid-row code)``.
    """
    zero = tl.zeros([BLOCK], dtype=w_row.dtype.element_ty)
    izero = tl.zeros([BLOCK], dtype=tl.int32)
    zs = tl.sum(zero, axis=0)
    inf = zs + float("inf")
    arange = tl.arange(0, BLOCK)
    # scan: invalid entries, the score range, and the start's three log-sum-exps online
    n_nan = 0
    n_pinf = 0
    n_fin = 0
    rmax = -inf
    rmin = inf
    mq = -inf
    sq = zs
    mf = -inf
    sf = zs
    mf2 = -inf
    se = zs
    for c in range(0, m, BLOCK):
        offs = c + arange
        mk = offs < m
        raw = tl.load(s_row + offs, mask=mk, other=-float("inf"))
        cc = tl.load(col + offs, mask=mk, other=0.0)
        fin = mk & (raw == raw) & (tl.abs(raw) < inf)
        k_nan, k_pinf, k_fin, cmax, cmin = tl.reduce(
            (tl.where(mk & (raw != raw), 1, izero), tl.where(mk & (raw == inf), 1, izero),
             tl.where(fin, 1, izero), tl.where(fin, raw, -inf), tl.where(fin, raw, inf)),
            0, _row_scan)
        n_nan += k_nan
        n_pinf += k_pinf
        n_fin += k_fin
        rmax = tl.maximum(rmax, cmax)
        rmin = tl.minimum(rmin, cmin)
        old = fin & (cc > 0.0)
        fresh = fin & (cc <= 0.0)
        q = raw - kappa * tl.log(tl.where(old, cc, zero + 1.0))
        mq, sq = _online_add(mq, sq, q, old, zero)
        mf, sf = _online_add(mf, sf, raw, fresh, zero)
        mf2, se = _online_add(mf2, se, omr * raw, fresh, zero)
    bad = _invalid_code(n_nan, n_pinf, n_fin)
    rmax = tl.where(n_fin > 0, rmax, zs)
    s_abs = tl.where(n_fin > 0, tl.minimum(rmax - rmin, inf), zs)
    p_old = mq - rmax + tl.log(sq)
    p_new = mf - rmax + tl.log(sf)
    log_e = mf2 - omr * rmax + tl.log(se)
    zeta = _start_zeta(p_old, p_new, log_e, omr)
    # the joint Newton iteration, one pass per step
    n_fast = tl.minimum(fast_steps, max_iter)
    step = inf
    bound = inf
    dz = zs
    done = 0
    it = 0
    while done == 0:
        sa = zs
        sagr = zs
        sag = zs
        mdx = zs
        for c in range(0, m, BLOCK):
            offs = c + arange
            mk, live, s, old, log_c = _chunk(s_row, col, offs, m, rmax, zero)
            ub = _upper_root(s - zeta, log_c, old, live, omr, kappa, zero)
            if it == 0:
                x = ub
                dx = zero
            else:
                xo = tl.load(x_buf + offs, mask=mk, other=0.0)
                r = tl.load(r_buf + offs, mask=mk, other=0.0)
                ginv = tl.load(g_buf + offs, mask=mk, other=0.0)
                x = tl.where(live, tl.minimum(xo - (r + dz) * ginv, ub), zero)
                dx = x - xo
            a, ginv, r = _evaluate(x, log_c, s, zeta, live, kappa, zero)
            tl.store(x_buf + offs, x, mask=mk)
            tl.store(r_buf + offs, r, mask=mk)
            tl.store(g_buf + offs, ginv, mask=mk)
            ag = a * ginv
            c_sa, c_sagr, c_sag, c_mdx = tl.reduce((a, ag * r, ag, tl.abs(dx)), 0, _sum3_max1)
            sa += c_sa
            sagr += c_sagr
            sag += c_sag
            mdx = tl.maximum(mdx, c_mdx)
        done, step, bound = _after_pass(it, mdx, dz, step, bound, zeta, s_abs, tol, eps, n_fast)
        if done == 0:
            dz = (sa - 1.0 - sagr) / sag
            zeta = zeta + dz
            it += 1
    ok = (done == 1) | ((done == 2) & (step <= tol))
    if done == 3:
        ok = step <= tol
        if max_iter > n_fast:
            zeta, it2, bound = _chunked_safeguarded(
                s_row, col, x_buf, r_buf, g_buf, m, rmax, zeta, omr, kappa, tol, eps,
                max_iter - n_fast, BLOCK)
            it = it + it2
            ok = bound <= tol
    # one per-key Newton step at the final zeta, then normalise (x = log a <= 0 up to it)
    total = zs
    for c in range(0, m, BLOCK):
        offs = c + arange
        mk, live, _ = _chunk_live(s_row, offs, m, rmax)
        x = tl.load(x_buf + offs, mask=mk, other=0.0)
        r = tl.load(r_buf + offs, mask=mk, other=0.0)
        ginv = tl.load(g_buf + offs, mask=mk, other=0.0)
        e = tl.where(live, tl.exp(x - r * ginv), zero)
        tl.store(x_buf + offs, e, mask=mk)
        total += tl.sum(e, axis=0)
    for c in range(0, m, BLOCK):
        offs = c + arange
        mk = offs < m
        a = tl.load(x_buf + offs, mask=mk, other=0.0) / total
        tl.store(w_row + offs, a, mask=mk)
        tl.store(col + offs, tl.load(col + offs, mask=mk, other=0.0) + a, mask=mk)
    return it, bound, ok, bad


@triton.jit
def _chunked_safeguarded(
    s_row, col, x_buf, r_buf, g_buf, m, rmax, zeta, omr, kappa, tol, eps, budget,
    BLOCK: tl.constexpr,
):
    """The safeguarded nested iteration on a chunked row: per-key monotone Newton from the
    upper bound at fixed ``zeta`` (chunk by chunk), bracketed Newton on ``zeta``. Leaves
    ``x``, ``r`` (0: solved at the final ``zeta``) and ``1/g`` in the scratch rows; returns
    ``(zeta, steps, error bound)``."""
    zero = tl.zeros([BLOCK], dtype=x_buf.dtype.element_ty)
    zs = tl.sum(zero, axis=0)
    inf = zs + float("inf")
    arange = tl.arange(0, BLOCK)
    zeta = tl.where((zeta == zeta) & (tl.abs(zeta) < inf), zeta, zs)
    zlo = -inf
    zhi = inf
    dz = zs
    best = inf
    stall = 0
    bound = inf
    it = 0
    while (it < budget) & (bound > tol) & (stall < 3):
        # per key: shift by the last zeta step (first order), then Newton to the root
        inner = zs
        mu = -inf
        su = zs
        for c in range(0, m, BLOCK):
            offs = c + arange
            mk, live, s, old, log_c = _chunk(s_row, col, offs, m, rmax, zero)
            if it == 0:
                x = _upper_root(s - zeta, log_c, old, live, omr, kappa, zero)
            else:
                g_prev = tl.load(g_buf + offs, mask=mk, other=1.0)
                x = tl.where(live, tl.load(x_buf + offs, mask=mk, other=0.0) - dz * g_prev, zero)
            x, step_k = _keys_at_zeta(x, log_c, s, zeta, live, kappa, tol, zero)
            inner = tl.maximum(inner, step_k)
            log_d = _log_add(log_c, x)
            ginv = 1.0 / (1.0 + kappa * tl.exp(x - log_d))
            tl.store(x_buf + offs, x, mask=mk)
            tl.store(g_buf + offs, ginv, mask=mk)
            tl.store(r_buf + offs, zero, mask=mk)
            mu, su = _online_add(mu, su, x, live, zero)
        u = mu + tl.log(su)  # log sum_j a_j: 0 at the root
        slope = zs
        for c in range(0, m, BLOCK):
            offs = c + arange
            mk, live, _ = _chunk_live(s_row, offs, m, rmax)
            x = tl.load(x_buf + offs, mask=mk, other=0.0)
            ginv = tl.load(g_buf + offs, mask=mk, other=0.0)
            slope += tl.sum(tl.where(live, tl.exp(x - u) * ginv, zero), axis=0)
        new, zlo, zhi = _bracketed_zeta(zeta, u, slope, zlo, zhi, omr)
        dz = new - zeta
        zeta = new
        bound = tl.maximum(tl.abs(dz), inner)
        stall = _stall(bound, best, stall, zeta, eps)
        best = tl.minimum(best, bound)
        it += 1
    # x at the final zeta: the first-order shift of the last step
    for c in range(0, m, BLOCK):
        offs = c + arange
        mk = offs < m
        x = tl.load(x_buf + offs, mask=mk, other=0.0)
        ginv = tl.load(g_buf + offs, mask=mk, other=0.0)
        tl.store(x_buf + offs, x - dz * ginv, mask=mk)
    return zeta, it, bound


@triton.jit
def _forward_chunked_kernel(
    s_ptr, w_ptr, stats_ptr, param_ptr, col_ptr, scratch_ptr,
    n, stride_b, stride_r, max_iter, fast_steps,
    BLOCK: tl.constexpr,
):
    """The forward for rows longer than ``_forward_kernel`` holds: one program per slice walks
    the rows, each solved by ``_chunked_row``; ``col_ptr`` (``B x n``, zeros) holds the column
    masses and ``scratch_ptr`` (``B x 3 x n``) the row's iterate."""
    b = tl.program_id(0)
    omr, kappa, tol, eps = _params(param_ptr)
    col = col_ptr + b.to(tl.int64) * n
    scratch = scratch_ptr + b.to(tl.int64) * 3 * n
    iters_max = 0
    resid_max = tl.sum(tl.zeros([BLOCK], dtype=w_ptr.dtype.element_ty), axis=0)
    all_ok = 1
    bad = 0
    for i in range(0, n):
        row = b.to(tl.int64) * stride_b + i * stride_r
        it, bound, ok, row_bad = _chunked_row(
            s_ptr + row, col, scratch, scratch + n, scratch + 2 * n, w_ptr + row, i + 1,
            omr, kappa, tol, eps, max_iter, fast_steps, BLOCK)
        if bad == 0:
            bad = row_bad
        iters_max = tl.maximum(iters_max, it)
        resid_max = tl.where(bound == bound, tl.maximum(resid_max, bound), resid_max + float("inf"))
        if not ok:
            all_ok = 0
    _store_stats(stats_ptr + b * N_STATS, iters_max, resid_max, all_ok, bad)


@triton.jit
def _stream_row_kernel(
    s_ptr, w_ptr, stats_ptr, param_ptr, col_ptr, scratch_ptr,
    m, max_iter, fast_steps,
    BLOCK: tl.constexpr,
):
    """One row of the stream (``m`` keys): ``_chunked_row`` on the stream's column masses."""
    omr, kappa, tol, eps = _params(param_ptr)
    it, bound, ok, bad = _chunked_row(
        s_ptr, col_ptr, scratch_ptr, scratch_ptr + m, scratch_ptr + 2 * m, w_ptr, m,
        omr, kappa, tol, eps, max_iter, fast_steps, BLOCK)
    _store_stats(stats_ptr, it, bound, ok, bad)


@triton.jit
def _backward_chunked_kernel(
    a_ptr, cp_ptr, g_ptr, out_ptr, param_ptr, carried_ptr,
    n, stride_b, stride_r,
    BLOCK: tl.constexpr,
):
    """The reverse sweep of ``_backward_kernel`` for rows longer than a program holds: each
    row in two passes over chunks (its two sums, then the gradient), the carried column
    gradient in ``carried_ptr`` (``B x n``, zeros)."""
    b = tl.program_id(0)
    kappa = tl.load(param_ptr + PARAM_KAPPA)
    zero = tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty)
    carried = carried_ptr + b.to(tl.int64) * n
    arange = tl.arange(0, BLOCK)
    for k in range(0, n):
        i = n - 1 - k
        base = b.to(tl.int64) * stride_b + i * stride_r
        sum_v = tl.sum(zero, axis=0)
        sum_p = sum_v
        for c in range(0, i + 1, BLOCK):
            offs = c + arange
            mk = offs <= i
            a = tl.load(a_ptr + base + offs, mask=mk, other=0.0)
            d = tl.load(cp_ptr + base + offs, mask=mk, other=1.0)
            g = tl.load(g_ptr + base + offs, mask=mk, other=0.0)
            gc = tl.load(carried + offs, mask=mk, other=0.0)
            pos = mk & (a > 0.0)
            p = tl.where(pos, a / (1.0 + kappa * a / tl.where(pos, d, zero + 1.0)), zero)
            c_v, c_p = tl.reduce((p * (g + gc), p), 0, _sum2)
            sum_v += c_v
            sum_p += c_p
        for c in range(0, n, BLOCK):
            offs = c + arange
            mk = offs <= i
            a = tl.load(a_ptr + base + offs, mask=mk, other=0.0)
            d = tl.load(cp_ptr + base + offs, mask=mk, other=1.0)
            g = tl.load(g_ptr + base + offs, mask=mk, other=0.0)
            gc = tl.load(carried + offs, mask=mk, other=0.0)
            pos = mk & (a > 0.0)
            d = tl.where(pos, d, zero + 1.0)
            p = tl.where(pos, a / (1.0 + kappa * a / d), zero)
            sbar = p * (g + gc) - p * (sum_v / sum_p)
            tl.store(out_ptr + base + offs, sbar, mask=offs < n)
            tl.store(carried + offs, gc - kappa * sbar / d, mask=mk)
