// The joint Newton iteration on (x, zeta) of a row and its safeguarded fallback.
//
// Row l solves, over its live keys j, with kappa = rho / (1 - rho) and the column masses
// C_j = C[l-1, j] of the earlier rows (x_j = log a[l, j], zeta = log Z_l),
//
//     r_j = x_j + kappa log(C_j + e^{x_j}) + zeta - s_j = 0,     sum_j e^{x_j} = 1.
//
// One joint Newton step, with g_j = 1 + kappa a_j / (C_j + a_j) and p_j = a_j / g_j:
//
//     dzeta = (sum a - 1 - sum p_j r_j) / sum p_j,     dx_j = -(r_j + dzeta) / g_j,
//
// each iterate clamped to the upper bound of its key's root at the new zeta,
// min(s_j - zeta - kappa log C_j, (1 - rho)(s_j - zeta)). A pass (newton_pass) applies one
// step and evaluates everything the next one needs; after the first step a_j and log D_j are
// updated by the expm1/log1p polynomials of fast_math.h where the steps are small.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fast_math.h"
#include "row_solve.h"
#include "team.h"
#include "work.h"

namespace causal_ot {

// Newton step size measure: keys with a_j below this contribute nothing measurable.
template <typename T>
inline T counted_floor(T tol) { return std::log(tol) - T(30); }

// Safeguarded nested solve (fallback): for each zeta, every key's scalar convex equation by
// Newton from its upper bound (monotone from above: at most 200 steps, stopped once a step is
// below tol / 10 or changes nothing); zeta by bracketed Newton on u(zeta) = log sum_j a_j(zeta)
// (slope in [-1, -(1-rho)]), given up once its step stops shrinking within 1e3 ulps of zeta's
// scale (a tol below the dtype's resolution) or the bracket closes.
template <typename T>
void solve_safe(std::int64_t m, const T* s, const T* c, const T* lc, T* x, T& zeta, T kappa,
                T omr, double tol, std::int64_t max_iter, RowStats& st) {
  T lo = -std::numeric_limits<T>::infinity(), hi = std::numeric_limits<T>::infinity();
  double prev = std::numeric_limits<double>::infinity();
  int stall = 0;
  const T floor_x = counted_floor<T>(T(tol));
  for (std::int64_t it = 1; it <= max_iter; ++it) {
    double inner = 0.0;
    T sum_a = 0, sum_ag = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      const T t = s[j] - zeta;
      T ub = omr * t;
      if (c[j] > 0) ub = std::min(ub, t - kappa * lc[j]);
      T xj = ub;
      T g = 1;
      for (int k = 0; k < 200; ++k) {
        const T a = std::exp(xj);
        const T ld = c[j] > 0 ? std::log(std::max(c[j] + a, Lim<T>::tiny)) : xj;
        const T ratio = c[j] > 0 ? a / (c[j] + a) : T(1);
        g = 1 + kappa * ratio;
        const T dx = (xj + kappa * ld - t) / g;
        const T xn = xj - dx;
        if (!(std::abs(dx) > T(0.1) * T(tol)) || xn == xj) { xj = xn; break; }
        xj = xn;
        if (k == 199 && xj > floor_x) inner = std::max(inner, double(std::abs(dx)));
      }
      x[j] = xj;
      const T a = std::exp(xj);
      sum_a += a;
      sum_ag += a / g;
    }
    const T u = std::log(sum_a);
    const T slope = sum_ag / sum_a;
    const T b1 = zeta + u, b2 = zeta + u / omr;
    lo = std::max(lo, std::min(b1, b2));
    hi = std::min(hi, std::max(b1, b2));
    T nz = zeta + u / slope;
    if (!(nz >= lo && nz <= hi)) nz = T(0.5) * (lo + hi);
    const double step = std::max(double(std::abs(nz - zeta)), inner);
    zeta = nz;
    st.iters += 1;
    st.resid = step;
    if (step <= tol) { st.ok = true; return; }
    // below the dtype's resolution the step stops shrinking: give up instead of looping
    if (step >= prev && step <= 1e3 * double(Lim<T>::eps) * (1.0 + std::abs(double(zeta)))) {
      if (++stall >= 3) break;
    }
    prev = std::min(prev, step);
    if (!(hi > lo)) break;
  }
  // final x at the final zeta
  for (std::int64_t j = 0; j < m; ++j) {
    const T t = s[j] - zeta;
    T ub = omr * t;
    if (c[j] > 0) ub = std::min(ub, t - kappa * lc[j]);
    T xj = ub;
    for (int k = 0; k < 200; ++k) {
      const T a = std::exp(xj);
      const T ld = c[j] > 0 ? std::log(std::max(c[j] + a, Lim<T>::tiny)) : xj;
      const T ratio = c[j] > 0 ? a / (c[j] + a) : T(1);
      const T dx = (xj + kappa * ld - t) / (1 + kappa * ratio);
      const T xn = xj - dx;
      if (!(std::abs(dx) > T(0.1) * T(tol)) || xn == xj) { xj = xn; break; }
      xj = xn;
    }
    x[j] = xj;
  }
  st.ok = st.resid <= tol;
}

struct PassSums {
  double sum_a, sum_p, sum_pr, mdx, mall;
  // max_j |r_j / g_j| and max_j 1/g_j at the new iterate (newton_pass of level 2 or 3; else
  // inf): no key moves by more than max(|dz|, mrg + |dz| mg) in the next step (next_move_bound)
  double mrg = std::numeric_limits<double>::infinity(), mg = 1.0;
};

// Before a pass: a bound on the largest |x_new - x_old| it will take, max(|dz|, max_j |dx_j|),
// dx_j = -(r_j + dz) g_j^{-1} the unclamped step. The clamp only shortens a step or moves a key
// down to the bound at the new zeta, which lies at most |dz| below the old one (both terms of
// min(q_j - zeta, (1-rho)(s_j - zeta)) fall by at most |dz|), and every iterate starts at or
// below its bound: so a clamped key moves by at most max(|dx_j|, |dz|). Reads two arrays (the
// exact scan, with the clamp, read five).
template <typename T>
double max_key_step(std::int64_t lo, std::int64_t hi, const Work<T>& w, T dz) {
  const T* __restrict r = w.r.data();
  const T* __restrict gi = w.gi.data();
  T mall = std::abs(dz);
#pragma omp simd reduction(max : mall)
  for (std::int64_t j = lo; j < hi; ++j) mall = std::max(mall, std::abs((r[j] + dz) * gi[j]));
  return double(mall);
}

// The number of keys whose unclamped step |dx_j| exceeds lim.
template <typename T>
double keys_beyond(std::int64_t lo, std::int64_t hi, const Work<T>& w, T dz, T lim) {
  const T* __restrict r = w.r.data();
  const T* __restrict gi = w.gi.data();
  T n = 0;  // a T: an int lane blocked vectorising
#pragma omp simd reduction(+ : n)
  for (std::int64_t j = lo; j < hi; ++j) n += std::abs((r[j] + dz) * gi[j]) > lim ? T(1) : T(0);
  return double(n);
}

// A bound on max_key_step from the last pass's sums, without a scan: |dx_j| = |r_j + dz| / g_j
// <= |r_j| / g_j + |dz| / g_j <= mrg + |dz| mg (inf where the pass kept no such maxima).
inline double next_move_bound(const PassSums& ps, double dz) {
  return std::max(std::abs(dz), ps.mrg + std::abs(dz) * ps.mg);
}

// The joint Newton loop's bound on the error of the iterate that a step of size `step` (the
// it-th) produced, prev the step before it (see the stopping rule in joint_newton). It grows
// with step, so a bound on the step gives a bound on it.
inline double newton_error_bound(std::int64_t it, double step, double prev) {
  double bound = step;
  if (it > 1 && step < prev * 0.25 && step < 1.0 / 1024.0)
    bound = std::min(bound, 4.0 * step * step * step / (prev * prev));
  return bound;
}

// The pass's level: the largest step (max_key_step) picks it (kPolyLimit). Beyond 1/8 (fresh
// exp/log for every key) a second scan counts the keys beyond it: if few (<= 1/32 of them: a
// key evaluated fresh on its own costs about 20 keys of a level-1 pass, fresh for all about
// 2.3), level 1 with those keys evaluated fresh by the pass (returned as -1).
template <typename T>
int pass_level(std::int64_t lo, std::int64_t hi, const Work<T>& w, T dz) {
  const double dmax = max_key_step<T>(lo, hi, w, dz);
  if (dmax <= kPolyLimit[3]) return 3;
  if (dmax <= kPolyLimit[2]) return 2;
  if (dmax <= kPolyLimit[1]) return 1;
  const double n = keys_beyond<T>(lo, hi, w, dz, T(kPolyLimit[1]));
  return n * 32.0 <= double(hi - lo) ? -1 : 0;
}

// Key j evaluated fresh at x_j (a_j = e^{x_j}, log D_j, 1/g_j, r_j at zeta), its terms added
// to the pass's sums: where a polynomial update does not apply.
template <typename T>
inline void eval_fresh(std::int64_t j, Work<T>& w, T kappa, T zeta, T& sum_a, T& sum_p,
                       T& sum_pr) {
  const T xj = w.x[j], cj = w.c[j];
  const bool old = cj > 0;
  const T an = fexp(xj);
  const T ldn = old ? flog(std::max(cj + an, Lim<T>::tiny)) : xj;
  const T dn = cj + an;
  const T g_inv = old ? dn / (dn + kappa * an) : T(1) / (T(1) + kappa);
  const T rj = xj + kappa * ldn + zeta - w.s[j];
  const T p = an * g_inv;
  w.a[j] = an;
  w.ld[j] = ldn;
  w.r[j] = rj;
  w.gi[j] = g_inv;
  sum_a += an;
  sum_p += p;
  sum_pr += p * rj;
}

// The row's last pass (the caller has bounded its step so that the row stops after it): the
// step as in newton_pass with level-POLY polynomial updates, then x_j, a_j, log D_j and sum a
// only, none of what a next step would need (1/g_j, r_j: a division and two sums less a key).
template <typename T, int POLY>
PassSums newton_final_pass(std::int64_t lo, std::int64_t hi, Work<T>& w, T omr, T dz, T nz,
                           T floor_x) {
  const T* __restrict s = w.s.data();
  const T* __restrict c = w.c.data();
  const T* __restrict q = w.q.data();
  T* __restrict x = w.x.data();
  const T* __restrict r = w.r.data();
  const T* __restrict gi = w.gi.data();
  T* __restrict a = w.a.data();
  T* __restrict ld = w.ld.data();
  T sum_a = 0, mdx = 0, mall = 0;
#pragma omp simd reduction(+ : sum_a) reduction(max : mdx, mall)
  for (std::int64_t j = lo; j < hi; ++j) {
    const T dx = -(r[j] + dz) * gi[j];
    const T ub = std::min(q[j] - nz, omr * (s[j] - nz));
    const T xo = x[j];
    const T xn = std::min(xo + dx, ub);
    const T d = xn - xo;
    const T ae = a[j] * expm1_small<T, POLY>(d);
    const T an = a[j] + ae;
    const T ldn = c[j] > 0 ? ld[j] + log1p_small<T, POLY>(ae / (c[j] + a[j])) : xn;
    const T ad = std::abs(d);
    x[j] = xn;
    a[j] = an;
    ld[j] = ldn;
    sum_a += an;
    mall = std::max(mall, ad);
    mdx = std::max(mdx, (xo > floor_x || xn > floor_x) ? ad : T(0));
  }
  return {double(sum_a), 0.0, 0.0, double(mdx), double(mall)};
}

// One merged Newton pass: apply the step (dx_j = -(r_j + dz) g_j^{-1}, clamped to the upper
// bound of the root at the new zeta nz), then evaluate the new iterate (a_j, log D_j, 1/g_j,
// r_j) and the sums of the next step. POLY: update a_j and log D_j from the old values with
// expm1/log1p polynomials of level POLY, valid for |step| <= kPolyLimit[POLY] (the caller
// checks mall after the pass); POLY = 0: fresh exp/log for every key. EXC: a key that steps
// further is flagged instead (a_j = -1, left out of the sums) and evaluated fresh after the
// loop (w's exc list); the flags cost a fifth of a polynomial pass, so only where the caller
// expects such keys (pass_level -1).
template <typename T, int POLY, bool EXC = false>
PassSums newton_pass(std::int64_t lo, std::int64_t hi, Work<T>& w, T kappa, T omr,
                     T dz, T nz, T floor_x) {
  const T* __restrict s = w.s.data();
  const T* __restrict c = w.c.data();
  const T* __restrict q = w.q.data();
  T* __restrict x = w.x.data();
  T* __restrict r = w.r.data();
  T* __restrict gi = w.gi.data();
  T* __restrict a = w.a.data();
  T* __restrict ld = w.ld.data();
  const T g_fresh = T(1) / (T(1) + kappa);
  const T limit = T(kPolyLimit[POLY]);
  constexpr bool STAT = POLY >= 2;
  T sum_a = 0, sum_p = 0, sum_pr = 0, mdx = 0, mall = 0, n_bad = 0, mrg = 0, mg = 0;
#pragma omp simd reduction(+ : sum_a, sum_p, sum_pr, n_bad) reduction(max : mdx, mall, mrg, mg)
  for (std::int64_t j = lo; j < hi; ++j) {
    const T dx = -(r[j] + dz) * gi[j];
    const T ub = std::min(q[j] - nz, omr * (s[j] - nz));
    const T xo = x[j];
    const T xn = std::min(xo + dx, ub);
    const T d = xn - xo;
    const bool old = c[j] > 0;
    T an, ldn;
    if (POLY) {
      const T e = expm1_small<T, POLY>(d);
      const T ae = a[j] * e;
      an = a[j] + ae;
      ldn = old ? ld[j] + log1p_small<T, POLY>(ae / (c[j] + a[j])) : xn;
    } else {
      an = fexp(xn);
      ldn = old ? flog(std::max(c[j] + an, Lim<T>::tiny)) : xn;
    }
    const T dn = c[j] + an;
    const T g_inv = old ? dn / (dn + kappa * an) : g_fresh;
    const T rj = xn + kappa * ldn + nz - s[j];
    const T p = an * g_inv;
    const T ad = std::abs(d);
    x[j] = xn;
    ld[j] = ldn;
    r[j] = rj;
    gi[j] = g_inv;
    if (EXC) {
      const bool bad = !(ad <= limit);  // (a NaN step too: evaluated fresh, then visible)
      a[j] = bad ? T(-1) : an;
      sum_a += bad ? T(0) : an;
      sum_p += bad ? T(0) : p;
      sum_pr += bad ? T(0) : p * rj;
      n_bad += bad ? T(1) : T(0);
    } else {
      a[j] = an;
      sum_a += an;
      sum_p += p;
      sum_pr += p * rj;
    }
    mall = std::max(mall, ad);
    mdx = std::max(mdx, (xo > floor_x || xn > floor_x) ? ad : T(0));
    if (STAT) {
      mrg = std::max(mrg, std::abs(rj * g_inv));
      mg = std::max(mg, g_inv);
    }
  }
  if (EXC && n_bad > 0) {
    std::int64_t* __restrict idx = w.exc.data();
    const std::int64_t ne = gather_if(lo, hi, idx, [&](std::int64_t j) { return a[j] < T(0); });
    for (std::int64_t k = 0; k < ne; ++k)
      eval_fresh<T>(idx[k], w, kappa, nz, sum_a, sum_p, sum_pr);
  }
  PassSums ps{double(sum_a), double(sum_p), double(sum_pr), double(mdx), double(mall)};
  if (STAT) {
    ps.mrg = double(mrg);
    ps.mg = double(mg);
  }
  return ps;
}

// Rows aim at tol / 10: a row's error moves the column masses of every later row, so the
// operator's error is a sum over rows.
constexpr double kRowTolFraction = 0.1;
// The joint loop's steps before the safeguarded nested iteration (solve_safe) takes over.
constexpr std::int64_t kJointSteps = 40;
// A step this many ulps of the row's scale (1 + |zeta| + max |s|) is at the dtype's rounding
// level: no longer shrinking there, the row stops (a tol below what the dtype resolves).
constexpr double kStallUlps = 16.0;

// The row's sums from both workers' (sums add, largest moves take the max); ahead: also this
// worker's scan of the next row (max, min, NaN flag), after which both hold the whole row's.
inline void combine_sums(Member& me, PassSums& p, double* ahead = nullptr) {
  double mine[10] = {p.sum_a, p.sum_p, p.sum_pr, p.mdx, p.mall, p.mrg, p.mg, 0.0, 0.0, 0.0};
  double other[10] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -HUGE_VAL, HUGE_VAL, 0.0};
  if (ahead) std::copy_n(ahead, 3, mine + 7);
  exchange(me, mine, ahead ? 10 : 7, other);
  p.sum_a += other[0];
  p.sum_p += other[1];
  p.sum_pr += other[2];
  p.mdx = std::max(p.mdx, other[3]);
  p.mall = std::max(p.mall, other[4]);
  p.mrg = std::max(p.mrg, other[5]);  // (inf from either: no bound)
  p.mg = std::max(p.mg, other[6]);
  if (ahead) {
    ahead[0] = std::max(ahead[0], other[7]);
    ahead[1] = std::min(ahead[1], other[8]);
    ahead[2] = std::max(ahead[2], other[9]);
  }
}

// One pass of the joint loop at the level chosen for it (pass_level; last: the row's final
// pass), then, where rounding moved a key across the level's limit, the pass again, fresh
// (this worker's keys only: its own decision).
template <typename T>
PassSums joint_pass(RowSolve<T>& rs, T dz, T nz, T floor_x, int poly, bool last) {
  const std::int64_t lo = rs.lo, hi = rs.hi;
  Work<T>& w = rs.w;
  const T kappa = rs.kappa, omr = rs.omr;
  PassSums ps = last         ? newton_final_pass<T, 3>(lo, hi, w, omr, dz, nz, floor_x)
                : poly == 3  ? newton_pass<T, 3>(lo, hi, w, kappa, omr, dz, nz, floor_x)
                : poly == 2  ? newton_pass<T, 2>(lo, hi, w, kappa, omr, dz, nz, floor_x)
                : poly == 1  ? newton_pass<T, 1>(lo, hi, w, kappa, omr, dz, nz, floor_x)
                : poly == -1 ? newton_pass<T, 1, true>(lo, hi, w, kappa, omr, dz, nz, floor_x)
                             : newton_pass<T, 0>(lo, hi, w, kappa, omr, dz, nz, floor_x);
  if (poly > 0 && ps.mall > kPolyLimit[poly]) {
    T* __restrict r = w.r.data();
    T* __restrict gi = w.gi.data();
    for (std::int64_t j = lo; j < hi; ++j) { r[j] = 0; gi[j] = 0; }
    const double mdx = ps.mdx, mall = ps.mall;
    ps = newton_pass<T, 0>(lo, hi, w, kappa, omr, T(0), nz, floor_x);
    ps.mdx = mdx;
    ps.mall = mall;
  }
  return ps;
}

// Where the joint loop ended: converged or stalled at rounding level (finished), else after
// `it` steps, the last of size prev_step.
struct JointEnd {
  bool finished = false;
  std::int64_t it = 0, steps = 0;
  double prev_step = std::numeric_limits<double>::infinity();
};

// The joint Newton loop from the first evaluation ps (both workers' sums). A pass's level
// comes from a scan bounding the keys' steps (pass_level), or, once the last pass's maxima
// bound this step's moves below 2^-12 (next_move_bound, the same on both workers), level 3
// without a scan; if that bound already meets the stopping rule, the pass is the row's last
// (newton_final_pass). Stopping rule: the step just taken estimates the error of the previous
// iterate; with Newton's quadratic convergence e_{k+1} <= K e_k^2 and K estimated by
// step/prev^2, the new iterate's error is about step^3/prev^2 (times a safety factor 4),
// trusted only in the quadratic regime (newton_error_bound).
template <typename T>
JointEnd joint_newton(RowSolve<T>& rs, PassSums& ps, RowStats& st) {
  const double tol = rs.tol;
  const T floor_x = counted_floor<T>(T(tol));
  JointEnd end;
  end.steps = std::min<std::int64_t>(rs.max_iter, kJointSteps);
  double prev_step = std::numeric_limits<double>::infinity();
  std::int64_t it = 0;
  for (it = 1; it <= end.steps; ++it) {
    const T dz = T((ps.sum_a - 1.0 - ps.sum_pr) / ps.sum_p);
    const T nz = rs.zeta + dz;
    const double bnd = next_move_bound(ps, double(dz));
    const bool last = bnd <= kPolyLimit[3] &&
                      newton_error_bound(it, bnd, prev_step) <= kRowTolFraction * tol;
    const int poly = bnd <= kPolyLimit[3] ? 3 : pass_level<T>(rs.lo, rs.hi, rs.w, dz);
    ps = joint_pass<T>(rs, dz, nz, floor_x, poly, last);
    combine_sums(rs.me, ps);
    rs.zeta = nz;
    const double step = std::max(double(std::abs(dz)), ps.mdx);
    if (!std::isfinite(step)) break;
    // a last pass stops the row below (step <= bnd), rounding aside; were it not to, the
    // evaluation that the next step needs, fresh (both workers: a decision on shared numbers)
    if (last && !(newton_error_bound(it, step, prev_step) <= kRowTolFraction * tol)) {
      T* __restrict r = rs.w.r.data();
      T* __restrict gi = rs.w.gi.data();
      for (std::int64_t j = rs.lo; j < rs.hi; ++j) { r[j] = 0; gi[j] = 0; }
      const double mdx = ps.mdx, mall = ps.mall;
      ps = newton_pass<T, 0>(rs.lo, rs.hi, rs.w, rs.kappa, rs.omr, T(0), nz, floor_x);
      combine_sums(rs.me, ps);
      ps.mdx = mdx;
      ps.mall = mall;
    }
    const double bound = newton_error_bound(it, step, prev_step);
    if (bound <= kRowTolFraction * tol) {
      st.iters = int(it);
      st.resid = bound;
      st.ok = true;
      end.finished = true;
      return end;
    }
    // x_j = s_j - zeta - kappa log D_j is known only to about eps (|s| + |zeta| + ...)
    const double floor =
        kStallUlps * double(Lim<T>::eps) * (1.0 + std::abs(double(rs.zeta)) + rs.s_abs);
    if (step <= floor && step >= 0.5 * prev_step) {
      st.iters = int(it);
      st.resid = step;
      st.ok = step <= tol;  // rows aim at tol/10; a stall between that and tol still meets tol
      end.finished = true;
      return end;
    }
    prev_step = step;
  }
  end.it = it;
  end.prev_step = prev_step;
  return end;
}

// A row the joint loop left unconverged: the safeguarded nested iteration (solve_safe), on
// worker 0 alone (worker 1 returns 0 and leaves the row to it: both took this branch, and the
// last exchange ordered worker 1's writes before worker 0's reads), then the weights and log D
// at the final x. Returns sum a.
template <typename T>
T finish_unconverged(RowSolve<T>& rs, const JointEnd& end, RowStats& st) {
  Work<T>& w = rs.w;
  const std::int64_t m = rs.m;
  const T inf = std::numeric_limits<T>::infinity();
  st.iters = int(std::min(end.it, end.steps));
  st.fallback = true;
  if (rs.me.tm && rs.me.t == 1) return T(0);
  if (rs.me.tm) {  // worker 0 takes worker 1's keys [hi, m) from worker 1's Work
    for (std::int64_t j = rs.hi; j < m; ++j) {
      w.s[j] = rs.wo.s[j];
      w.c[j] = rs.wo.c[j];
      w.lc[j] = rs.wo.lc[j];
      w.x[j] = rs.wo.x[j];
    }
  }
  const std::int64_t rest = std::max<std::int64_t>(1, rs.max_iter - end.steps);
  T zeta = rs.zeta;
  if (rs.max_iter > end.steps || !std::isfinite(zeta)) {
    if (!std::isfinite(zeta)) zeta = 0;
    for (std::int64_t j = 0; j < m; ++j) w.x[j] = std::isfinite(w.x[j]) ? w.x[j] : T(0);
    solve_safe<T>(m, w.s.data(), w.c.data(), w.lc.data(), w.x.data(), zeta, rs.kappa, rs.omr,
                  rs.tol, rest, st);
  } else {
    st.ok = false;
    st.resid = end.prev_step;
  }
  // no step: r = gi = 0, and the clamp is inactive at the final x
  for (std::int64_t j = 0; j < m; ++j) {
    w.r[j] = 0;
    w.gi[j] = 0;
    w.q[j] = inf;  // only the (1-rho)(s_j - zeta) bound clamps here: the root satisfies it
  }
  rs.zeta = zeta;
  const PassSums ps = newton_pass<T, 0>(0, m, w, rs.kappa, rs.omr, T(0), zeta,
                                        counted_floor<T>(T(rs.tol)));
  return T(ps.sum_a);
}

}  // namespace causal_ot
