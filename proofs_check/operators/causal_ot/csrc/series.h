// The series solve of long rows: the far keys' roots as a power series in one variable.
//
// After the near solve (row_start.h) zeta z1 is close to the root, but the far keys sit at the
// closed form x_j = q_j - zeta, off their roots by kappa log(1 + u_j), which the joint loop
// would take several passes over every key to fix. A far key's root is known in closed form
// instead: with w_j = e^{q_j - zeta} / C_j, u_j = a_j / C_j is u(w_j), the root of
// u (1 + u)^kappa = w, a power series in v_j = (1 + kappa) w_j (SeriesCoef). So the far keys'
// mass at any zeta is sum_k beta_k nu_k y^k, nu_k = sum_far b_j v_j^{k-1} at z1 (b_j = C_j w_j,
// y = e^{z1 - zeta}): one pass for the moments nu_k, then the near solve again on the near keys
// and those that pass a second cut at z1 (v_j > kSeriesCut), with that far mass, to the row's
// stopping rule; then one pass writes every key's weight (final_series), and the row is
// solved. Taken only if the far keys still have v_j <= kSeriesMax at the final zeta;
// otherwise the joint loop runs from the first near solve's start.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fast_math.h"
#include "newton.h"
#include "row_solve.h"
#include "row_start.h"
#include "team.h"
#include "work.h"

namespace causal_ot {

// The far keys' series. The root u(w) of u (1 + u)^kappa
// = w is, by Lagrange inversion, sum_k c_k w^k with c_k = (-1)^{k-1} / k! prod_{i=0}^{k-2}
// (k kappa + i), and log1p(u(w)) = sum_k d_k w^k with d_k = (-1)^{k-1} / k! prod_{i=1}^{k-1}
// (k kappa + i). Both in v = (1 + kappa) w, whose coefficients stay bounded for every kappa
// (c_k and d_k grow like (1 + kappa)^k): u = w sum_k c[k] v^{k-1}, c[k] = c_k / (1 + kappa)^{k-1}
// (d alike). They converge for v < (1+kappa) kappa^kappa / (1+kappa)^{1+kappa} (the branch
// point of the inverse, at u = -1/(1+kappa)), at least 1/e; at v <= kSeriesMax = 0.05 the
// 16 terms leave less than 2^-50 relative (checked against mpmath's root at rho 0.3, 0.9,
// 0.99: 13-16 terms needed for 2^-50; the terms shrink by about e v each). float32 takes 8:
// at v = 0.05 they leave at most 4.4e-9 relative in u and log1p(u) (mpmath, rho 0.05 to
// 0.999999; 2^-24 = 6e-8), and half the terms halve the two passes over the far keys.
constexpr int kSeriesTermsMax = 16;
template <typename T>
constexpr int kSeriesTerms = sizeof(T) == 8 ? 16 : 8;
struct SeriesCoef {
  double kappa = -1.0;
  double c[kSeriesTermsMax + 2] = {};  // c[k] for k = 1..kSeriesTermsMax + 1, as above
  double d[kSeriesTermsMax + 2] = {};
};
inline const SeriesCoef& series_coef(double kappa) {
  static thread_local SeriesCoef sc;
  if (sc.kappa != kappa) {
    for (int k = 1; k <= kSeriesTermsMax + 1; ++k) {
      double p = 1.0;
      for (int i = 0; i <= k - 2; ++i) p *= (k * kappa + i) / ((i + 2) * (1.0 + kappa));
      sc.c[k] = (k % 2 ? 1.0 : -1.0) * p;
      double pd = 1.0 / k;
      for (int i = 1; i <= k - 1; ++i) pd *= (k * kappa + i) / (i * (1.0 + kappa));
      sc.d[k] = (k % 2 ? 1.0 : -1.0) * pd;
    }
    sc.kappa = kappa;
  }
  return sc;
}

// sum_{i<16} e[i] w^i by Estrin's scheme (w2 = w^2, w4, w8): 7 dependent operations, not 16
template <typename T>
__attribute__((always_inline)) inline T estrin16(const T* e, T w, T w2, T w4, T w8) {
  const T q0 = e[0] + e[1] * w, q1 = e[2] + e[3] * w, q2 = e[4] + e[5] * w, q3 = e[6] + e[7] * w;
  const T q4 = e[8] + e[9] * w, q5 = e[10] + e[11] * w, q6 = e[12] + e[13] * w;
  const T q7 = e[14] + e[15] * w;
  const T r0 = q0 + q1 * w2, r1 = q2 + q3 * w2, r2 = q4 + q5 * w2, r3 = q6 + q7 * w2;
  return (r0 + r1 * w4) + (r2 + r3 * w4) * w8;
}

// sum_{i<8} e[i] w^i by Estrin's scheme
template <typename T>
__attribute__((always_inline)) inline T estrin8(const T* e, T w, T w2, T w4) {
  const T q0 = e[0] + e[1] * w, q1 = e[2] + e[3] * w, q2 = e[4] + e[5] * w, q3 = e[6] + e[7] * w;
  return (q0 + q1 * w2) + (q2 + q3 * w2) * w4;
}

// sum_{i < kSeriesTerms<T>} e[i] w^i (w2 = w^2, w4, w8; w8 unused in float32)
template <typename T>
__attribute__((always_inline)) inline T series_poly(const T* e, T w, T w2, T w4, T w8) {
  if constexpr (kSeriesTerms<T> == 16) {
    return estrin16<T>(e, w, w2, w4, w8);
  } else {
    static_assert(kSeriesTerms<T> == 8, "series_poly: 8 or 16 terms");
    return estrin8<T>(e, w, w2, w4);
  }
}

// Rows from this many keys on take the series solve: alone from kSeriesMinRow, in a team from
// kSeriesMinTeamRow, where its second near solve runs on both workers while the passes it
// saves are halved.
constexpr std::int64_t kSeriesMinRow = 256;
constexpr std::int64_t kSeriesMinTeamRow = 640;
// A key is far if (1 + kappa) w_j <= kSeriesCut at the first near solve's zeta, and the
// series is used if (1 + kappa) w_j <= kSeriesMax holds for every far key at the final zeta.
constexpr double kSeriesCut = 0.04, kSeriesMax = 0.05;
// The second near solve's step budget (the row's max_iter, at most this).
constexpr std::int64_t kSeriesNearSteps = 20;


// The row's weights once its zeta and near keys are solved by the series solve:
// a far key's from the series, a_j = C_j u(w_j), log D_j = log C_j + log1p(u(w_j)) (its own
// series, SeriesCoef::d), w_j = e^{q_j - zeta} / C_j = E_j e^{qmax_own - zeta} / C_j; a near
// key's from the near solve; a fresh key's (C_j = 0) exact, x_j = (1-rho)(s_j - zeta).
// Returns sum_j a_j over this worker's keys.
template <typename T>
T final_series(std::int64_t lo, std::int64_t hi, std::int64_t nf_own, Work<T>& w, T kappa, T omr,
               T zeta, T qmax, const NearKeys<T>& nr, const SeriesCoef& sc) {
  const T opk = T(1) + kappa;
  const T* __restrict s = w.s.data();
  const T* __restrict c = w.c.data();
  const T* __restrict lc = w.lc.data();
  T* __restrict a = w.a.data();
  T* __restrict ld = w.ld.data();
  const T scale = std::exp(qmax - zeta);
  constexpr int nt = kSeriesTerms<T>;
  T cf[nt], df[nt];
  for (int k = 1; k <= nt; ++k) {
    cf[k - 1] = T(sc.c[k]);
    df[k - 1] = T(sc.d[k]);
  }
  T sum_a = 0;
#pragma omp simd reduction(+ : sum_a)
  for (std::int64_t j = lo; j < hi; ++j) {
    const T b = a[j] * scale;
    const bool plain = (c[j] > 0) & (b >= T(0));
    const T wj = plain ? b / std::max(c[j], Lim<T>::tiny) : T(0);
    const T vj = opk * wj, v2 = vj * vj, v4 = v2 * v2, v8 = v4 * v4;
    const T u = wj * series_poly<T>(cf, vj, v2, v4, v8);
    const T L = wj * series_poly<T>(df, vj, v2, v4, v8);
    const T an = plain ? c[j] * u : T(0);
    a[j] = an;
    ld[j] = lc[j] + L;
    sum_a += an;
  }
  for (std::int64_t k = 0; k < nf_own; ++k) {  // fresh keys
    const std::int64_t j = w.fresh[k];
    const T xf = omr * (s[j] - zeta);
    a[j] = fexp(xf);
    ld[j] = xf;
    sum_a += a[j];
  }
  for (std::int64_t k = 0; k < nr.nk; ++k) {  // near keys
    const std::int64_t j = nr.near[k];
    if (j < lo || j >= hi) continue;
    a[j] = nr.a[k];
    ld[j] = nr.ld[k];
    sum_a += nr.a[k];
  }
  return sum_a;
}

// The far keys' moments nu_k = sum b_j v_j^{k-1} (k < kSeriesTerms<T>), b_j = e^{q_j - z1} =
// E_j e^{qmax_own - z1}, v_j = (1 + kappa) b_j / C_j (powers by squaring: a chain of 4, not
// 15), over this worker's keys below the cut cut_b; into mine[0, nst).
template <typename T>
void series_moments(const RowSolve<T>& rs, T z1, T cut_b, double* mine) {
  const Work<T>& w = rs.w;
  const std::int64_t lo = rs.lo, hi = rs.hi;
  const T kappa = rs.kappa, inf = std::numeric_limits<T>::infinity();
  const T* __restrict c = w.c.data();
  const T* __restrict lc = w.lc.data();
  const T* __restrict q = w.q.data();
  const T* __restrict ea = w.a.data();
  constexpr int nst = kSeriesTerms<T>;
  const T sc_own = rs.qmax_own > -inf ? std::exp(rs.qmax_own - z1) : T(0);
  T m0 = 0, m1 = 0, m2 = 0, m3 = 0, m4 = 0, m5 = 0, m6 = 0, m7 = 0;
  T m8 = 0, m9 = 0, m10 = 0, m11 = 0, m12 = 0, m13 = 0, m14 = 0, m15 = 0;
#pragma omp simd reduction(+ : m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15)
  for (std::int64_t j = lo; j < hi; ++j) {
    const bool farj = (c[j] > 0) & (ea[j] >= T(0)) & !(q[j] - lc[j] > cut_b);
    const T b = farj ? ea[j] * sc_own : T(0);
    const T vj = (T(1) + kappa) * b / std::max(c[j], Lim<T>::tiny);
    const T v2 = vj * vj, v4 = v2 * v2, v8 = v4 * v4;
    const T p1 = b * vj, p2 = b * v2, p3 = p1 * v2;
    const T p4 = b * v4, p5 = p1 * v4, p6 = p2 * v4, p7 = p3 * v4;
    m0 += b; m1 += p1; m2 += p2; m3 += p3; m4 += p4; m5 += p5; m6 += p6; m7 += p7;
    if constexpr (nst == 16) {
      m8 += b * v8; m9 += p1 * v8; m10 += p2 * v8; m11 += p3 * v8;
      m12 += p4 * v8; m13 += p5 * v8; m14 += p6 * v8; m15 += p7 * v8;
    }
  }
  const double all[kSeriesTermsMax] = {double(m0), double(m1), double(m2), double(m3),
                                       double(m4), double(m5), double(m6), double(m7),
                                       double(m8), double(m9), double(m10), double(m11),
                                       double(m12), double(m13), double(m14), double(m15)};
  std::copy_n(all, kSeriesTermsMax, mine);
}

// How the series solve's near solve ended: converged (to the row's stopping rule), its steps
// and the error bound of its last iterate.
struct SeriesNearEnd {
  bool conv = false;
  int its = 0;
  double bound = std::numeric_limits<double>::infinity();
};

// The near solve again, on all ntp (padded) near keys of w's buffers, with the far mass
// sum_k gam[k] y^k from the series (y = e^{z1 - zeta}; its slope -d/dzeta sum_k k gam[k] y^k),
// to the joint loop's stopping rule (newton_error_bound <= tol / 10), in at most the row's
// budget of Newton steps (max_iter, at most kSeriesNearSteps). Moves rs.zeta.
template <typename T>
SeriesNearEnd series_near_solve(RowSolve<T>& rs, const T* gam, std::int64_t ntp, T z1) {
  constexpr int nst = kSeriesTerms<T>;
  const T kappa = rs.kappa, omr = rs.omr;
  const double tol = rs.tol;
  T zeta = rs.zeta;
  T dzb = 0;
  double prev_b = std::numeric_limits<double>::infinity();
  SeriesNearEnd end;
  const int b_max = int(std::min<std::int64_t>(rs.max_iter, kSeriesNearSteps));
  for (int it = 1; it <= b_max; ++it) {
    const T nz = zeta + dzb;
    const NearSums<T> sums = near_pass<T>(rs.w, ntp, kappa, omr, nz, dzb);
    const T sa = sums.sa, sp = sums.sp, spr = sums.spr, mdx = sums.mdx;
    zeta = nz;
    const T y = std::exp(z1 - zeta);
    T fm = gam[nst], fd = nst * gam[nst];
    for (int k = nst - 1; k >= 1; --k) {
      fm = fm * y + gam[k];
      fd = fd * y + T(k) * gam[k];
    }
    fm *= y;
    fd *= y;
    T fr = 0;
    for (std::int64_t kf = 0; kf < rs.nf; ++kf)
      fr += fexp_lat(omr * (rs.score(rs.fresh[kf]) - zeta));
    const double step = std::max(double(std::abs(dzb)), double(mdx));
    end.its = it;
    end.bound = it > 1 ? newton_error_bound(it - 1, step, prev_b) : step;
    if (it > 1 && end.bound <= 0.1 * tol) {
      end.conv = true;
      break;
    }
    prev_b = it > 1 ? step : std::numeric_limits<double>::infinity();
    const T tot = fm + fr + sa;
    dzb = (near_mass_term(tot) - spr) / (sp + fd + omr * fr);
  }
  rs.zeta = zeta;
  return end;
}

// The near solve's buffers (nk keys) saved into w.keep, or restored from it.
template <typename T>
void keep_near_keys(Work<T>& w, std::int64_t nk, bool restore) {
  std::vector<T>* bufs[5] = {&w.nx, &w.na, &w.nld, &w.nr, &w.ngi};
  for (int b = 0; b < 5; ++b) {
    T* kept = w.keep.data() + b * kMaxNear;
    if (restore)
      std::copy_n(kept, nk, bufs[b]->data());
    else
      std::copy_n(bufs[b]->data(), nk, kept);
  }
}

// The series solve (see the top of this file), after the near solve of the near keys nc.
// On success rs.series is set and rs.near_keys names all near keys; otherwise the near solve's
// state is back (the new near keys stay marked in w.a: the start pass evaluates them fresh).
template <typename T>
void series_solve(RowSolve<T>& rs, const NearCandidates<T>& nc) {
  Work<T>& w = rs.w;
  const T kappa = rs.kappa;
  const SeriesCoef& sc = series_coef(double(kappa));
  const T z1 = rs.zeta;
  const T cut_b = z1 + std::log(T(kSeriesCut) / (T(1) + kappa));
  const T* __restrict c = w.c.data();
  const T* __restrict lc = w.lc.data();
  const T* __restrict q = w.q.data();
  const T* __restrict ea = w.a.data();
  const std::int64_t nb_own = gather_if(rs.lo, rs.hi, w.nearb.data(), [&](std::int64_t j) {
    return (c[j] > 0) & (ea[j] >= T(0)) & (q[j] - lc[j] > cut_b);
  });
  constexpr int nst = kSeriesTerms<T>;
  double mine[kSeriesTermsMax + 1];
  series_moments<T>(rs, z1, cut_b, mine);
  mine[nst] = double(nb_own);
  double other[kSeriesTermsMax + 1] = {};
  exchange(rs.me, mine, nst + 1, other);  // (and the new near keys' count)
  const std::int64_t* nbl = nullptr;
  const std::int64_t nb = merge_lists<T>(rs.me, &Work<T>::nearb, nb_own,
                                         std::int64_t(other[nst]), w, &Work<T>::nearb_m, &nbl);
  const std::int64_t nk = nc.nn;
  if (nk + nb > kMaxNear) return;
  // gam[k] = c[k] nu_k: the far mass at zeta is sum_k gam[k] y^k (both workers' sums:
  // a + b = b + a exactly)
  T gam[nst + 1];
  for (int k = 1; k <= nst; ++k) gam[k] = T(sc.c[k] * (mine[k - 1] + other[k - 1]));
  keep_near_keys<T>(w, nk, false);  // the first near solve's keys, restored if this fails
  std::int64_t* all = w.near_all.data();
  std::copy_n(nc.near, nk, all);
  std::copy_n(nbl, nb, all + nk);
  const std::int64_t ntp = load_near_keys<T>(rs, nbl, nk, nb, z1);
  const SeriesNearEnd end = series_near_solve<T>(rs, gam, ntp, z1);
  rs.far_lr = std::min(rs.far_lr, cut_b);  // every far key: q_j - log C_j below both cuts
  // The series holds at the final zeta if every far key's v_j = (1 + kappa) w_j, at most
  // kSeriesCut at z1, is at most kSeriesMax there. And b_j = E_j e^{qmax_own - zeta}: a key
  // whose E_j underflowed in the P loop has b_j < e^{-under} e^{qmax - zeta}, negligible only
  // while qmax - zeta is not large (float32: under = 87; rows with keys of tiny C_j reach it).
  rs.series = end.conv && T(kSeriesCut) * std::exp(z1 - rs.zeta) <= T(kSeriesMax) &&
              rs.qmax - std::min(z1, rs.zeta) <= Lim<T>::under - T(40);
  if (rs.series) {
    rs.near_keys = NearKeys<T>{all, nk + nb, w.nx.data(), w.na.data(), w.nld.data(),
                               w.nr.data(), w.ngi.data()};
    rs.series_its = end.its;
    rs.series_bound = end.bound;
  } else {
    rs.zeta = z1;
    keep_near_keys<T>(w, nk, true);
  }
}

}  // namespace causal_ot
