// The row's start: a closed form for every key, zeta from it, and the near keys solved first.
//
// Closed-form start: a key that already has mass keeps its potential, x_j = q_j - zeta with
// q_j = s_j - kappa log C_j; a fresh key (C_j = 0) solves x = (1-rho)(s_j - zeta) exactly.
// zeta is the root of the mass of that start (start_zeta). Near keys, old keys whose start
// weight is not small against their column mass, start poorly so: few of them are solved
// first, with zeta, by the joint Newton step on that small system (near_solve), the far keys'
// mass kept at its closed form; the row's joint Newton (newton.h) then starts close to the
// root, or the series solve (series.h) finishes the row.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fast_math.h"
#include "newton.h"
#include "row_solve.h"
#include "team.h"
#include "work.h"

namespace causal_ot {

// The start pass's log1p levels: |u| = a_j / C_j up to expm1(kPolyLimit[L]), the range the
// level-L log1p polynomial was sized for (see kPolyLimit).
constexpr double kStartLimit[3] = {0.0, 0.1331484530668263, 0.0157477085866857};

// The start x_j = min(q_j - zeta, (1-rho)(s_j - zeta)), the near keys' iterates in place, and
// a zero step (r = 1/g = 0): for newton_pass<T, 0> as the first evaluation.
template <typename T>
void start_plain(std::int64_t lo, std::int64_t hi, Work<T>& w, T omr, T zeta,
                 const NearKeys<T>& nr) {
  const T* __restrict s = w.s.data();
  const T* __restrict q = w.q.data();
  T* __restrict x = w.x.data();
  T* __restrict r = w.r.data();
  T* __restrict gi = w.gi.data();
#pragma omp simd
  for (std::int64_t j = lo; j < hi; ++j) {
    x[j] = std::min(q[j] - zeta, omr * (s[j] - zeta));
    r[j] = 0;
    gi[j] = 0;
  }
  for (std::int64_t k = 0; k < nr.nk; ++k) {  // each worker its own
    const std::int64_t j = nr.near[k];
    if (j >= lo && j < hi) x[j] = nr.x[k];
  }
}

// The start and its first evaluation (newton_pass<T, 0> with a zero step at the start
// x_j = min(q_j - zeta, (1-rho)(s_j - zeta)), the near keys' iterates in place) without fresh
// transcendentals for the keys whose start keeps the closed form x_j = q_j - zeta: there
// a_j = E_j e^{qmax - zeta} with E_j = e^{q_j - qmax} from the P sum (held in w.a on entry;
// -1 marks a near key) and log D_j = log C_j + log1p(a_j / C_j), by the level-LEVEL polynomial
// (caller: every such key has a_j / C_j <= kStartLimit[LEVEL]). The near keys take their
// values from the near solve (evaluated there at the same zeta); the others (fresh, clamped,
// or a ratio beyond the limit: flagged a_j = -1 by the vector loop) are evaluated fresh.
template <typename T, int LEVEL>
PassSums start_pass(std::int64_t lo, std::int64_t hi, Work<T>& w, T kappa, T omr,
                    T zeta, T qmax, const NearKeys<T>& nr) {
  const T* __restrict s = w.s.data();
  const T* __restrict c = w.c.data();
  const T* __restrict lc = w.lc.data();
  const T* __restrict q = w.q.data();
  T* __restrict x = w.x.data();
  T* __restrict r = w.r.data();
  T* __restrict gi = w.gi.data();
  T* __restrict a = w.a.data();
  T* __restrict ld = w.ld.data();
  const T scale = std::exp(qmax - zeta);
  const T ulim = T(kStartLimit[LEVEL]);
  // E_j = 0 (underflowed in the P loop: E_j < e^{-under}) means a_j < e^{-40} only while the
  // scale is below e^{under - 40}; beyond, such keys are evaluated fresh (the polynomial
  // passes never refresh a_j = 0, which would keep such a key at weight 0)
  const bool e_ok = qmax - zeta <= Lim<T>::under - T(40);
  T sum_a = 0, sum_p = 0, sum_pr = 0;
  T n_exc = 0;  // a T, not an int: mixed lane widths kept this loop from vectorising
#pragma omp simd reduction(+ : sum_a, sum_p, sum_pr, n_exc)
  for (std::int64_t j = lo; j < hi; ++j) {
    const bool old = c[j] > 0;
    const T xq = q[j] - zeta, xs = omr * (s[j] - zeta);
    const T xj = std::min(xq, xs);
    x[j] = xj;
    const T an0 = a[j] * scale;
    const T u = an0 / std::max(c[j], Lim<T>::tiny);  // (a selected divisor: not vectorised)
    const bool plain = old & (xq <= xs) & (an0 >= T(0)) & (u <= ulim) & ((an0 > T(0)) | e_ok);
    const T uu = plain ? u : T(0);
    const T an = plain ? an0 : T(0);
    const T ldn = lc[j] + log1p_small<T, LEVEL>(uu);
    const T dn = c[j] + an;
    const T g_inv = plain ? dn / (dn + kappa * an) : T(0);
    const T rj = xj + kappa * ldn + zeta - s[j];
    const T p = an * g_inv;
    a[j] = plain ? an : T(-1);
    ld[j] = ldn;
    r[j] = plain ? rj : T(0);
    gi[j] = g_inv;
    sum_a += an;
    sum_p += p;
    sum_pr += p * rj;
    n_exc += plain ? T(0) : T(1);
  }
  std::int64_t n_near = 0;
  for (std::int64_t k = 0; k < nr.nk; ++k) {  // each worker its own
    const std::int64_t j = nr.near[k];
    if (j < lo || j >= hi) continue;
    n_near += 1;
    const T p = nr.a[k] * nr.gi[k];
    x[j] = nr.x[k];
    a[j] = nr.a[k];
    ld[j] = nr.ld[k];
    r[j] = nr.r[k];
    gi[j] = nr.gi[k];
    sum_a += nr.a[k];
    sum_p += p;
    sum_pr += p * nr.r[k];
  }
  if (n_exc > T(n_near)) {  // flags beyond the near keys'
    std::int64_t* __restrict idx = w.exc.data();
    const std::int64_t ne = gather_if(lo, hi, idx, [&](std::int64_t j) { return a[j] < T(0); });
    for (std::int64_t k = 0; k < ne; ++k)
      eval_fresh<T>(idx[k], w, kappa, zeta, sum_a, sum_p, sum_pr);
  }
  return {double(sum_a), double(sum_p), double(sum_pr), 0.0, 0.0};
}

// E_j = e^{q_j - ref} over the keys [lo, hi) (0 for fresh keys, q_j = inf) into w.a; returns
// their sum (the start's P sum, start_sums)
template <typename T>
T e_pass(std::int64_t lo, std::int64_t hi, Work<T>& w, T ref) {
  const T* __restrict q = w.q.data();
  T* __restrict e = w.a.data();
  const T inf = std::numeric_limits<T>::infinity();
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (std::int64_t j = lo; j < hi; ++j) {
    const T ej = (q[j] < inf) ? fexp(q[j] - ref) : T(0);
    e[j] = ej;
    acc += ej;
  }
  return acc;
}

// Where the E_j of the row's first pass (row_driver.h) may lie against the max of q: e_ref at
// least this far below it (their sum over up to ~1e6 keys stays finite: e^300 in float64, e^40 in float32)
template <typename T>
constexpr T kERefHi = sizeof(T) == 8 ? T(300) : T(40);

// The near solves' Newton step on the row's mass tot (at zeta): on log(tot) = 0, whose
// numerator is tot log tot, while tot is far from 1 (a start far off overshot otherwise); on
// tot = 1, numerator tot - 1 (the joint loop's), once |tot - 1| <= 2^-6, where both converge
// quadratically and the scalar log, a chain of ~45 cycles each step waits on, is not needed.
template <typename T>
inline T near_mass_term(T tot) {
  const T e = tot - T(1);
  return std::abs(e) <= T(1.0 / 64) ? e : tot * flog_lat(std::max(tot, Lim<T>::tiny));
}

// One joint Newton step on the near keys (near_solve, series_near_solve): each key's x moved
// by the step dz in zeta, -(r_k + dz) / g_k, clamped to the upper bound of its root at the
// new zeta nz, then a_k, log D_k, r_k and 1/g_k evaluated there; returns sum a, sum p, sum p r
// (p = a / g) and the largest move of x, over the first n_pad lanes of w's near arrays.
template <typename T>
struct NearSums {
  T sa, sp, spr, mdx;
};
template <typename T>
inline NearSums<T> near_pass(Work<T>& w, std::int64_t n_pad, T kappa, T omr, T nz, T dz) {
  const T* __restrict ns = w.ns.data();
  const T* __restrict nc = w.nc.data();
  const T* __restrict nlc = w.nlc.data();
  T* __restrict nx = w.nx.data();
  T* __restrict na = w.na.data();
  T* __restrict nld = w.nld.data();
  T* __restrict nr = w.nr.data();
  T* __restrict ngi = w.ngi.data();
  T sa = 0, sp = 0, spr = 0, mdx = 0;
#pragma omp simd reduction(+ : sa, sp, spr) reduction(max : mdx)
  for (std::int64_t k = 0; k < n_pad; ++k) {
    const T tk = ns[k] - nz;
    const T ub = std::min(tk - kappa * nlc[k], omr * tk);
    const T xo = nx[k];
    const T xn = std::min(xo - (nr[k] + dz) * ngi[k], ub);
    const T a = fexp_lat(xn);
    const T d = nc[k] + a;
    const T ldk = flog_lat(std::max(d, Lim<T>::tiny));
    const T rk = xn + kappa * ldk - tk;
    const T g_inv = d / (d + kappa * a);
    const T pk = a * g_inv;
    nx[k] = xn;
    na[k] = a;
    nld[k] = ldk;
    nr[k] = rk;
    ngi[k] = g_inv;
    sa += a;
    sp += pk;
    spr += pk * rk;
    mdx = std::max(mdx, std::abs(xn - xo));
  }
  return NearSums<T>{sa, sp, spr, mdx};
}

// The closed-form start's sums: q_j (unless the first pass computed them), the fresh keys,
// E_j = e^{q_j - qmax_own} (in w.a, for the start pass) and, exchanged, the row's max of q,
// P = log sum_old e^{q_j} and the merged list of fresh keys.
template <typename T>
void start_sums(RowSolve<T>& rs, const RowStart<T>& start) {
  Work<T>& w = rs.w;
  const std::int64_t lo = rs.lo, hi = rs.hi, m = rs.m;
  const T kappa = rs.kappa;
  T* __restrict s = w.s.data();
  T* __restrict c = w.c.data();
  T* __restrict lc = w.lc.data();
  T* __restrict q = w.q.data();
  const T inf = std::numeric_limits<T>::infinity();
  T qmax_own = start.q_ready ? start.qmax : -inf;
  if (!start.q_ready) {
#pragma omp simd reduction(max : qmax_own)
    for (std::int64_t j = lo; j < hi; ++j) {
      const T qj = c[j] > 0 ? s[j] - kappa * lc[j] : inf;
      q[j] = qj;
      qmax_own = std::max(qmax_own, c[j] > 0 ? qj : -inf);
    }
  }
  // fresh keys (C_j = 0): the diagonal, and keys never given mass (alone, with one counted by
  // the first pass, that is the diagonal: no gather)
  std::int64_t nf_own = 1;
  if (!rs.me.tm && start.n_fresh == 1 && !(c[m - 1] > 0))
    w.fresh[0] = m - 1;
  else
    nf_own = gather_if(lo, hi, w.fresh.data(), [&](std::int64_t j) { return !(c[j] > 0); });
  // E_j = e^{q_j - qmax_own}, with qmax_own from here on the reference of the E_j: the first
  // pass's e_ref where it computed them (e_ref within [max q - kERefHi<T>, max q + 8]: no
  // overflow, and every later use of qmax_own as the E_j's scale holds)
  T acc_own = 0;
  if (start.e_ready && qmax_own > -inf) {
    acc_own = start.e_sum;
    qmax_own = start.e_ref;
  } else if (qmax_own > -inf) {
    acc_own = e_pass<T>(lo, hi, w, qmax_own);  // E_j, kept in w.a for the start pass
  }
  T qmax = qmax_own, P = -inf;
  std::int64_t nf_other = 0;
  {
    const double mine[3] = {double(qmax_own), double(acc_own), double(nf_own)};
    double other[3] = {-double(inf), 0.0, 0.0};
    exchange(rs.me, mine, 3, other);
    const T qmax_other = T(other[0]);
    qmax = std::max(qmax_own, qmax_other);
    nf_other = std::int64_t(other[2]);
    if (qmax > -inf) {
      T acc = qmax_own > -inf ? acc_own * std::exp(qmax_own - qmax) : T(0);
      if (qmax_other > -inf) acc += T(other[1]) * std::exp(qmax_other - qmax);
      P = qmax + std::log(acc);
    }
  }
  rs.nf = merge_lists<T>(rs.me, &Work<T>::fresh, nf_own, nf_other, w, &Work<T>::fresh_m,
                         &rs.fresh);
  rs.qmax_own = qmax_own;
  rs.acc_own = acc_own;
  rs.qmax = qmax;
  rs.P = P;
  rs.nf_own = nf_own;
}

// Newton on zeta stops once its step is below this: zeta is then within about K d^2 of the
// root (K = phi''/(2 |phi'|), at most a few hundredths), which the near solve or the row's
// first joint step absorbs.
constexpr double kStartZetaStop = 3e-2;
constexpr int kStartZetaSteps = 60;

// zeta: the root of E(z) + R(z) = 1, E = e^{P - z} (the old keys at the closed form), R =
// sum_fresh e^{(1-rho)(s_f - z)}, by Newton on one of two convex decreasing forms of it, so
// that from z = max(P, max s_f), at or left of the root (E + R >= 1 there), the iterates
// increase monotonically to it: where E > 0 and R < 0.999, on phi(z) = P - z - log(1 - R)
// (slope -1 - (1-rho) R/(1 - R): all but linear while R is not close to 1), else on
// g(z) = log(E + R), whose slope is E's while E dominates and R's (1 - rho) once the fresh
// key holds the mass (slow where rho is near 1).
template <typename T>
void start_zeta(RowSolve<T>& rs) {
  const T inf = std::numeric_limits<T>::infinity();
  const T P = rs.P, omr = rs.omr;
  T zeta = P;
  for (std::int64_t k = 0; k < rs.nf; ++k) zeta = std::max(zeta, rs.score(rs.fresh[k]));
  for (int k = 0; k < kStartZetaSteps; ++k) {
    T e_old = (P > -inf) ? std::exp(P - zeta) : T(0);
    T e_new = 0;
    for (std::int64_t k = 0; k < rs.nf; ++k) e_new += std::exp(omr * (rs.score(rs.fresh[k]) - zeta));
    T dz;
    if (e_old > 0 && e_new < T(0.999)) {
      const T om = T(1) - e_new;
      dz = (P - zeta - std::log1p(-e_new)) * om / (om + omr * e_new);
    } else {
      const T tot = e_old + e_new;
      dz = std::log(tot) * tot / (e_old + omr * e_new);
    }
    zeta += dz;
    if (!(std::abs(dz) > T(kStartZetaStop))) break;
  }
  rs.zeta = zeta;
}

// The near keys found by near_candidates: the merged list, and this worker's and the other's
// share of the far keys' sum of E_j (against the row's qmax).
template <typename T>
struct NearCandidates {
  const std::int64_t* near = nullptr;
  std::int64_t nn = 0;
  T acc_far_own = 0;
  double acc_far_other = 0;
};

// A key is near if (1 + kappa) a_j / C_j > kNearFrac at the upper bound of a_j, a cut lowered
// to kNearFracLarge / sqrt(kappa) at large kappa (where a key just below kNearFrac still moves
// by more than 1/8 in the first joint step once zeta has dropped).
constexpr double kNearFrac = 0.05, kNearFracLarge = 0.15;

// The near keys at the start's zeta, exchanged and merged; this worker's share of the far
// keys' P sum: its P sum less its near keys' (fresh keys have E_j = 0), or summed directly
// where that cancels badly (the far keys below 1e-6 of it in float64, 1e-2 in float32; the
// sum only sets the near solve's far mass, a start the joint Newton corrects). Sets far_lr,
// the bound on log(a_j / C_j) + zeta over the keys that keep the closed form: the near cut
// (every far key is below it), or, with more than kMaxNear near keys (not solved), the max
// over all keys.
template <typename T>
NearCandidates<T> near_candidates(RowSolve<T>& rs) {
  Work<T>& w = rs.w;
  const std::int64_t lo = rs.lo, hi = rs.hi;
  const T kappa = rs.kappa, inf = std::numeric_limits<T>::infinity();
  T* __restrict c = w.c.data();
  T* __restrict lc = w.lc.data();
  T* __restrict q = w.q.data();
  const T near_frac = std::min(T(kNearFrac), T(kNearFracLarge) / std::sqrt(kappa));
  const T near_cut = rs.zeta + std::log(near_frac / (T(1) + kappa));
  const std::int64_t nn_own = gather_if(lo, hi, w.near.data(), [&](std::int64_t j) {
    return (c[j] > 0) & (q[j] - lc[j] > near_cut);
  });
  T* __restrict ea = w.a.data();
  T acc_nd = 0;
  for (std::int64_t k = 0; k < nn_own; ++k) acc_nd += ea[w.near[k]];
  T acc_fd = rs.acc_own - acc_nd;
  if (!(acc_fd >= T(sizeof(T) == 8 ? 1e-6 : 1e-2) * rs.acc_own)) {
    acc_fd = 0;
#pragma omp simd reduction(+ : acc_fd)
    for (std::int64_t j = lo; j < hi; ++j)
      acc_fd += (c[j] > 0) & !(q[j] - lc[j] > near_cut) ? ea[j] : T(0);
  }
  if (rs.qmax_own > -inf) acc_fd *= std::exp(rs.qmax_own - rs.qmax);  // E_j were against qmax_own
  const double mine[2] = {double(nn_own), double(acc_fd)};
  double other[2] = {0.0, 0.0};
  exchange(rs.me, mine, 2, other);
  NearCandidates<T> nc;
  nc.nn = merge_lists<T>(rs.me, &Work<T>::near, nn_own, std::int64_t(other[0]), w,
                         &Work<T>::near_m, &nc.near);
  nc.acc_far_own = acc_fd;
  nc.acc_far_other = other[1];
  rs.far_lr = near_cut;
  if (nc.nn > kMaxNear) {
    T mx_all = -inf;
#pragma omp simd reduction(max : mx_all)
    for (std::int64_t j = lo; j < hi; ++j)
      mx_all = std::max(mx_all, c[j] > 0 ? q[j] - lc[j] : -inf);
    const double mine_mx[1] = {double(mx_all)};
    double other_mx[1] = {-double(inf)};
    exchange(rs.me, mine_mx, 1, other_mx);
    rs.far_lr = std::max(mx_all, T(other_mx[0]));
  }
  return nc;
}

// The near keys' buffers from keys [k0, k0 + n) of the list: score, C, log C and the start at
// zeta; a zero step (r = 1/g = 0); this worker's keys marked a_j = -1 in w.a (for the start
// pass). Then no-op lanes up to a multiple of kNearPad (dx = 0, a = 0 at every zeta); returns
// that padded count.
template <typename T>
std::int64_t load_near_keys(RowSolve<T>& rs, const std::int64_t* list, std::int64_t k0,
                            std::int64_t n, T zeta) {
  Work<T>& w = rs.w;
  for (std::int64_t k = k0; k < k0 + n; ++k) {
    const std::int64_t j = list[k - k0];
    const Work<T>& wj = rs.owner(j);
    w.ns[k] = wj.s[j];
    w.nc[k] = wj.c[j];
    w.nlc[k] = wj.lc[j];
    w.nx[k] = std::min(wj.q[j] - zeta, rs.omr * (wj.s[j] - zeta));
    w.nr[k] = 0;
    w.ngi[k] = 0;
    if (j >= rs.lo && j < rs.hi) w.a[j] = T(-1);
  }
  const std::int64_t nt = k0 + n;
  const std::int64_t ntp = (nt + kNearPad<T> - 1) / kNearPad<T> * kNearPad<T>;
  for (std::int64_t k = nt; k < ntp; ++k) {
    w.ns[k] = T(-1e30);
    w.nc[k] = T(1);
    w.nlc[k] = T(0);
    w.nx[k] = T(-1e30);
    w.nr[k] = 0;
    w.ngi[k] = 0;
  }
  return ntp;
}

// The near solve stops once a step is below kNearStop (the iterate then within ~1e-3 by
// quadratic convergence, no further than the far keys' closed-form start is from their roots:
// the joint loop's first step stays polynomial), or after kNearSteps (the joint loop starts
// from there, as from any start). A first step falling by more than 1 (downward from the
// upper bounds where the near keys start, it overshoots) is damped to kNearDamp of itself.
constexpr double kNearStop = 3e-2;
constexpr int kNearSteps = 30;
constexpr double kNearDamp = 0.7;

// Joint Newton on (near x, zeta), the far keys at their closed form (mass e^{p_far - zeta})
// and the fresh keys exact: the joint loop's step on this small system, each iterate clamped
// to its key's upper bound, with the low-latency exp and log (each step waits on the last).
// Newton on log(mass) = 0 while the mass is far from 1 (near_mass_term): the mass is a sum of
// exponentials of zeta, and its linearisation overshoots from a start far off.
template <typename T>
void near_solve(RowSolve<T>& rs, const NearCandidates<T>& nc) {
  const T inf = std::numeric_limits<T>::infinity();
  const T kappa = rs.kappa, omr = rs.omr;
  const T acc_far = nc.acc_far_own + T(nc.acc_far_other);  // (a + b = b + a: the same on both)
  const T p_far = acc_far > 0 ? rs.qmax + std::log(acc_far) : -inf;
  const std::int64_t nk = nc.nn;
  const std::int64_t nkp = load_near_keys<T>(rs, nc.near, 0, nk, rs.zeta);
  T zeta = rs.zeta;
  T dz = 0;
  for (int it = 0; it < kNearSteps; ++it) {
    const T nz = zeta + dz;
    const NearSums<T> sums = near_pass<T>(rs.w, nkp, kappa, omr, nz, dz);
    const T sa = sums.sa, sp = sums.sp, spr = sums.spr, mdx = sums.mdx;
    zeta = nz;
    T far = (p_far > -inf) ? fexp_lat(p_far - zeta) : T(0), fr = 0;
    for (std::int64_t kf = 0; kf < rs.nf; ++kf)
      fr += fexp_lat(omr * (rs.score(rs.fresh[kf]) - zeta));
    const T step = std::max(std::abs(dz), mdx);
    if (it > 0 && !(step > T(kNearStop))) break;
    const T tot = far + fr + sa;
    dz = (near_mass_term(tot) - spr) / (sp + far + omr * fr);
    if (it == 0 && dz < T(-1)) dz *= T(kNearDamp);
  }
  rs.zeta = zeta;
  // the far keys start at the bound at the new zeta, the near keys from their iterates,
  // evaluated there at this zeta by the last pass of the loop above
  const Work<T>& w = rs.w;
  rs.near_keys = NearKeys<T>{nc.near, nk, w.nx.data(), w.na.data(), w.nld.data(), w.nr.data(),
                             w.ngi.data()};
}

}  // namespace causal_ot
