// The row driver: one row of the operator from its scores to its weights, in phases.
//
// solve_row: the row's score range and NaN check (from the previous row's first pass, or a
// scan), the shift by the row max (Proposition 2.4: a constant shift changes nothing, and exp
// never overflows; a difference that overflows is a dead key), the first pass copying the
// row into the work arrays (or the compaction of a row with masked keys), solve_compact, and
// the normalisation that updates the column masses C and log C. solve_compact: the start
// (row_start.h), the series solve (series.h) where it applies, else the joint Newton loop and
// its fallback (newton.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fast_math.h"
#include "newton.h"
#include "options.h"
#include "row_solve.h"
#include "row_start.h"
#include "series.h"
#include "store.h"
#include "team.h"
#include "work.h"

namespace causal_ot {

// The start's first evaluation (a zero step): from the series root where the series solve
// solved the row; else from the closed form where the far keys' a_j / C_j allow (start_pass),
// else fresh exp/log. Then both workers' sums (and, after a shared row's first pass, the next
// row's scan: see first_pass).
template <typename T>
PassSums first_evaluation(RowSolve<T>& rs, const RowStart<T>& start) {
  Work<T>& w = rs.w;
  const std::int64_t lo = rs.lo, hi = rs.hi;
  const T kappa = rs.kappa, omr = rs.omr, zeta = rs.zeta, inf = std::numeric_limits<T>::infinity();
  const T floor_x = counted_floor<T>(T(rs.tol));
  PassSums ps;
  const T u_max = rs.far_lr < inf ? std::exp(rs.far_lr - zeta) : inf;
  if (rs.series) {
    const SeriesCoef& sc = series_coef(double(kappa));
    ps = PassSums{double(final_series<T>(lo, hi, rs.nf_own, w, kappa, omr, zeta, rs.qmax_own,
                                         rs.near_keys, sc)),
                  0.0, 0.0, 0.0, 0.0};
  } else if (u_max <= T(kStartLimit[2])) {
    ps = start_pass<T, 2>(lo, hi, w, kappa, omr, zeta, rs.qmax_own, rs.near_keys);
  } else if (u_max <= T(kStartLimit[1])) {
    ps = start_pass<T, 1>(lo, hi, w, kappa, omr, zeta, rs.qmax_own, rs.near_keys);
  } else {
    start_plain<T>(lo, hi, w, omr, zeta, rs.near_keys);
    ps = newton_pass<T, 0>(lo, hi, w, kappa, omr, T(0), zeta, floor_x);
  }
  if (rs.me.tm && start.ahead_row >= 0) {  // the first exchange after a shared first pass
    double ahead[3] = {double(w.ahead_max), double(w.ahead_min), double(w.ahead_nan)};
    combine_sums(rs.me, ps, ahead);
    w.ahead_max = T(ahead[0]);
    w.ahead_min = T(ahead[1]);
    w.ahead_nan = T(ahead[2]);
    w.ahead_row = start.ahead_row;
  } else {
    combine_sums(rs.me, ps);
  }
  return ps;
}

// One row on its m live keys (compacted): rs.w holds the scores s (shifted so max = 0, all
// > -under/omr), column masses c (>= 0) and lc = log c (any value where c = 0). On return
// w.a holds the (unnormalised) weights e^{x_j} and w.ld = log(c_j + a_j) (x_j where c_j = 0);
// returns sum a (0 on a team's worker 1 after a fallback: worker 0 finished the row).
template <typename T>
T solve_compact(RowSolve<T>& rs, const RowStart<T>& start, RowStats& st) {
  start_sums<T>(rs, start);
  start_zeta<T>(rs);
  if (rs.qmax > -std::numeric_limits<T>::infinity()) {
    const NearCandidates<T> nc = near_candidates<T>(rs);
    if (nc.nn > 0 && nc.nn <= kMaxNear) {
      near_solve<T>(rs, nc);
      if (rs.m >= (rs.me.tm ? kSeriesMinTeamRow : kSeriesMinRow) && rs.opt.series)
        series_solve<T>(rs, nc);
    }
  }
  PassSums ps = first_evaluation<T>(rs, start);
  if (rs.series) {
    st.iters = rs.series_its;
    st.resid = rs.series_bound;
    st.ok = true;
    st.series = true;
    return T(ps.sum_a);
  }
  const JointEnd end = joint_newton<T>(rs, ps, st);
  if (end.finished) return T(ps.sum_a);
  return finish_unconverged<T>(rs, end, st);
}

// The call-level constants every row uses.
template <typename T>
struct RowParams {
  T kappa, omr;
  double tol;
  std::int64_t max_iter;
  const KernelOptions& opt;
};

// One row's buffers: srow (l keys, -inf = masked), col (l masses C[l-1, :], updated to
// C'[l, :]) and lcol (its log, maintained here as well), out (l weights, written); stream_out:
// out written by streaming stores (converged unmasked rows); next: the next row's scores (l + 1
// keys; nullptr: none), scanned by this row's first pass; next2: the row after it (nullptr:
// none), prefetched.
template <typename T>
struct RowIo {
  std::int64_t l;
  const T* srow;
  T* col;
  T* lcol;
  T* out;
  bool stream_out = false;
  const T* next = nullptr;
  const T* next2 = nullptr;
};

// The row's score range and NaN flag.
template <typename T>
struct RowRange {
  T smax, smin;
  bool nan;
};

// The row's range and NaN check: read off the previous row's first pass, which scanned this
// row's scores too (in a team, both workers' parts, exchanged with that row's first
// evaluation), or scanned here and, in a team, exchanged. The next row but one is prefetched
// meanwhile: the scan is the first read of a row, from memory once the scores outgrow the
// caches, and the solve that follows leaves the memory idle. ahead: whether the range came
// from the previous row's pass.
template <typename T>
RowRange<T> row_range(const RowIo<T>& io, Work<T>& w, Member& me, bool& ahead) {
  const std::int64_t l = io.l, lo = me.tm ? me.lo : 0, hi = me.tm ? me.hi : l;
  const T inf = std::numeric_limits<T>::infinity();
  T smax = -inf, smin = inf;
  int nanc = 0;
  ahead = w.ahead_row == l && (!me.tm || me.last_split_h >= 0);
  w.ahead_row = -1;
  if (ahead) {
    smax = w.ahead_max;
    smin = w.ahead_min;
    nanc = w.ahead_nan > 0 ? 1 : 0;
  } else {
    const T* srow = io.srow;
#pragma omp simd reduction(max : smax) reduction(min : smin) reduction(| : nanc)
    for (std::int64_t j = lo; j < hi; ++j) {
      const T v = srow[j];
      nanc |= (v != v) ? 1 : 0;
      smax = v > smax ? v : smax;
      smin = v < smin ? v : smin;
    }
  }
  if (io.next2 != nullptr) {
    const std::int64_t nl = l + 2, nh = split_key(nl);
    const std::int64_t plo = me.tm && me.t == 1 ? nh : 0, phi = me.tm && me.t == 0 ? nh : nl;
    prefetch_lines(io.next2 + plo, (phi - plo) * std::int64_t(sizeof(T)));
  }
  if (me.tm && !ahead) {
    const double mine[3] = {double(smax), double(smin), double(nanc)};
    double other[3] = {-double(inf), double(inf), 0.0};
    exchange(me, mine, 3, other);
    smax = std::max(smax, T(other[0]));
    smin = std::min(smin, T(other[1]));
    nanc |= other[2] != 0.0 ? 1 : 0;
  }
  return RowRange<T>{smax, smin, nanc != 0};
}

// The E_j of the first pass may lie this far above the max of q (below it, kERefHi<T>).
constexpr double kERefLo = 8.0;

// The first pass over this worker's keys of an unmasked row: copies them into w (shifted by
// the row max), computes q_j = s_j - kappa log C_j and counts the fresh keys; with the
// previous row's max of q as a guess of this row's (w.e_ref), E_j = e^{q_j - e_ref} and their
// sum (the start's P; recomputed there where the guess is more than kERefHi below the max or
// kERefLo above it: overflow, or keys lost to underflow); and it scans the next row's scores
// at the same keys (the next row's range and NaN check; the worker with the row's last key
// takes the next row's new one too). One pass over the row, and in a team one exchange a row.
template <typename T>
RowStart<T> first_pass(const RowIo<T>& io, Work<T>& w, const Member& me, T kappa, T smax,
                       RowStats& st) {
  const std::int64_t l = io.l, lo = me.tm ? me.lo : 0, hi = me.tm ? me.hi : l;
  const T* srow = io.srow;
  const T* col = io.col;
  const T* lcol = io.lcol;
  const T* next = io.next;
  const T inf = std::numeric_limits<T>::infinity();
  RowStart<T> rs;
  const T e_ref = w.e_ref;
  const bool e_guess = std::isfinite(e_ref);
  T qmax_f = -inf, e_sum = 0, n_fresh = 0;  // (T, not int: one lane width)
  T nmax = -inf, nmin = inf, nnan = 0;
  T* __restrict ws = w.s.data();
  T* __restrict wc = w.c.data();
  T* __restrict wl = w.lc.data();
  T* __restrict wq = w.q.data();
  T* __restrict wa = w.a.data();
  auto pass = [&](auto with_e, auto with_next) {
#pragma omp simd reduction(max : qmax_f, nmax, nnan) reduction(min : nmin) \
    reduction(+ : e_sum, n_fresh)
    for (std::int64_t j = lo; j < hi; ++j) {
      const T sj = srow[j] - smax, cj = col[j], lj = lcol[j];
      const bool old = cj > 0;
      const T qj = old ? sj - kappa * lj : inf;
      ws[j] = sj;
      wc[j] = cj;
      wl[j] = lj;
      wq[j] = qj;
      qmax_f = std::max(qmax_f, old ? qj : -inf);
      n_fresh += old ? T(0) : T(1);
      if constexpr (decltype(with_e)::value) {
        const T ej = old ? fexp(qj - e_ref) : T(0);
        wa[j] = ej;
        e_sum += ej;
      }
      if constexpr (decltype(with_next)::value) {
        const T v = next[j];
        nnan = std::max(nnan, (v != v) ? T(1) : T(0));
        nmax = v > nmax ? v : nmax;
        nmin = v < nmin ? v : nmin;
      }
    }
  };
  if (e_guess && next != nullptr)
    pass(std::true_type{}, std::true_type{});
  else if (e_guess)
    pass(std::true_type{}, std::false_type{});
  else if (next != nullptr)
    pass(std::false_type{}, std::true_type{});
  else
    pass(std::false_type{}, std::false_type{});
  if (next != nullptr) {
    if (hi == l) {  // the next row's new key
      const T v = next[l];
      nnan = std::max(nnan, (v != v) ? T(1) : T(0));
      nmax = std::max(nmax, v);
      nmin = std::min(nmin, v);
    }
    w.ahead_max = nmax;  // alone: the whole next row; in a team, this worker's part, which
    w.ahead_min = nmin;  // first_evaluation exchanges (RowStart::ahead_row)
    w.ahead_nan = nnan;
    if (!me.tm) w.ahead_row = l + 1;
    rs.ahead_row = l + 1;
  }
  const bool e_in_range =
      e_guess && qmax_f > -inf && e_ref >= qmax_f - kERefHi<T> && e_ref <= qmax_f + T(kERefLo);
  rs.q_ready = true;
  rs.qmax = qmax_f;
  rs.n_fresh = std::int64_t(n_fresh);
  rs.e_ready = e_in_range;
  rs.e_ref = e_ref;
  rs.e_sum = e_sum;
  st.e_kept = e_in_range;
  if (qmax_f > -inf) w.e_ref = qmax_f;
  return rs;
}

// A row with masked keys: its live keys (shifted scores above cut) compacted into w, in
// order, their indices in w.idx; out zero (the live keys' weights are written later).
// Returns their count m, and the largest |score| among them in s_abs.
template <typename T>
std::int64_t compact_row(const RowIo<T>& io, Work<T>& w, T smax, T cut, T& s_abs) {
  const std::int64_t l = io.l;
  std::int64_t m = 0;
  for (std::int64_t j = 0; m < l && j < l; ++j) {
    const T v = io.srow[j] - smax;  // -inf for masked keys and overflowing differences
    io.out[j] = 0;
    if (v > cut) {
      s_abs = std::max(s_abs, std::abs(io.srow[j]));
      w.idx[m] = j;
      w.s[m] = v;
      w.c[m] = io.col[j];
      w.lc[m] = io.lcol[j];
      ++m;
    }
  }
  return m;
}

// Normalise the weights of keys [nlo, nhi) (all: the row unmasked, else its m compacted keys)
// and update the column masses: C' = C + a/tot = D + a (1/tot - 1), and its log from log D by
// one log1p step (|a (1/tot - 1) / D| <= |1/tot - 1|, tiny at convergence: level 3 when
// |1/tot - 1| <= 2^-12, level 1 up to 1/8; else a fresh log).
template <typename T>
void normalise_row(const RowIo<T>& io, Work<T>& w, std::int64_t m, bool all, std::int64_t nlo,
                   std::int64_t nhi, T tot) {
  T* out = io.out;
  T* col = io.col;
  T* lcol = io.lcol;
  const T* __restrict a = w.a.data();
  const T* __restrict ld = w.ld.data();
  const T* __restrict c = w.c.data();
  const T inv = T(1) / tot;
  const T dinv = inv - T(1);
  const T adinv = std::abs(dinv);
  auto new_log = [&](std::int64_t k) {
    const T dk = c[k] + a[k];
    return dk > 0 ? ld[k] + log1p_small<T, 1>(a[k] * dinv / dk) : T(0);
  };
  if (all && adinv <= T(kPolyLimit[3])) {
    T* __restrict o = io.stream_out ? w.o.data() : out;  // staged, then streamed
#pragma omp simd
    for (std::int64_t j = nlo; j < nhi; ++j) {
      const T aj = a[j] * inv;
      const T dk = c[j] + a[j];
      o[j] = aj;
      col[j] = c[j] + aj;
      lcol[j] = dk > 0 ? ld[j] + log1p_small<T, 3>(a[j] * dinv / dk) : T(0);
    }
    if (io.stream_out) stream_store<T>(out + nlo, o + nlo, nhi - nlo);
  } else if (all && adinv <= T(kPolyLimit[1])) {
#pragma omp simd
    for (std::int64_t j = nlo; j < nhi; ++j) {
      const T aj = a[j] * inv;
      out[j] = aj;
      col[j] = c[j] + aj;
      lcol[j] = new_log(j);
    }
  } else if (adinv > T(kPolyLimit[1])) {  // far from normalised (an unconverged row)
    for (std::int64_t k = all ? nlo : 0; k < (all ? nhi : m); ++k) {
      const std::int64_t j = all ? k : w.idx[k];
      const T aj = a[k] * inv;
      out[j] = aj;
      col[j] = c[k] + aj;
      lcol[j] = col[j] > 0 ? std::log(col[j]) : T(0);
    }
  } else {
    for (std::int64_t k = 0; k < m; ++k) {
      const std::int64_t j = w.idx[k];
      const T aj = a[k] * inv;
      out[j] = aj;
      col[j] = c[k] + aj;
      lcol[j] = new_log(k);
    }
  }
}

// Before a shared row: the columns that change hands (sync_columns) were written by the other
// worker in the previous row; without this row's scan exchange (ahead), an exchange first
// wherever any do (the split point moved; a masked row, which worker 0 solves alone), which
// both workers see from the same numbers.
template <typename T>
void team_row_columns(Member& me, std::int64_t l, bool ahead, bool unmasked) {
  const std::int64_t h = me.t == 0 ? me.hi : me.lo, last = me.last_split_h;
  if (ahead && (!unmasked || h > last)) {
    const double mine[1] = {0.0};
    double other[1];
    exchange(me, mine, 1, other);
  }
  sync_columns<T>(me, l, h, unmasked);
}

// Solve one row in place (see RowIo). w: this worker's work arrays and key lists; me: alone
// (me.tm == nullptr) or one of a team of two, which split the keys at h = split_key(l):
// [0, h) and [h, l). A row with masked keys is solved by worker 0 alone.
template <typename T>
RowStats solve_row(const RowIo<T>& io, const RowParams<T>& prm, Work<T>& w, Member& me) {
  RowStats st;
  const std::int64_t l = io.l;
  if (me.tm) {
    const std::int64_t h = split_key(l);
    me.lo = me.t == 0 ? 0 : h;
    me.hi = me.t == 0 ? h : l;
  }
  const std::int64_t lo = me.tm ? me.lo : 0, hi = me.tm ? me.hi : l;
  const T inf = std::numeric_limits<T>::infinity();
  bool ahead = false;
  const RowRange<T> rr = row_range<T>(io, w, me, ahead);
  if (rr.nan || rr.smax == inf || rr.smax == -inf) {  // the caller raises ValueError
    st.bad = rr.nan ? 1 : (rr.smax == inf ? 2 : 3);
    st.ok = false;
    if (!me.tm || me.t == 0)
      for (std::int64_t j = 0; j < l; ++j) io.out[j] = 0;
    return st;
  }
  const T cut = -(Lim<T>::under + std::log(T(l)) + T(4)) / prm.omr;  // weight < e^{-under}
  const bool unmasked = rr.smin - rr.smax > cut;  // every key survives
  if (me.tm) team_row_columns<T>(me, l, ahead, unmasked);
  std::int64_t m = 0;
  T s_abs = 0;
  RowStart<T> start;
  if (unmasked) {
    start = first_pass<T>(io, w, me, prm.kappa, rr.smax, st);
    m = l;
    s_abs = std::max(std::abs(rr.smax), std::abs(rr.smin));
  } else if (me.tm) {  // the compaction is serial: worker 0 solves the row alone
    if (me.t == 1) return st;
    Member alone;
    RowIo<T> io_alone = io;
    io_alone.next = io_alone.next2 = nullptr;  // (the next row then scans its own scores)
    return solve_row<T>(io_alone, prm, w, alone);
  } else {
    m = compact_row<T>(io, w, rr.smax, cut, s_abs);
    if (m == 0) return st;  // cannot happen for a validated row (its max key survives)
  }
  const Work<T>& wo = me.tm ? *static_cast<const Work<T>*>(me.tm->priv[1 - me.t]) : w;
  RowSolve<T> rs{m, lo, me.tm ? hi : m, w, wo, me, prm.kappa, prm.omr, prm.tol, prm.max_iter,
                 s_abs, prm.opt};
  const T tot = solve_compact<T>(rs, start, st);
  if (me.tm && st.fallback && me.t == 1) return st;  // worker 0 finished the row alone
  // the keys this worker normalises: its range in a team, all of them alone or after a fallback
  const bool split = me.tm && !st.fallback;
  if (split) st.split_h = me.t == 0 ? hi : lo;
  normalise_row<T>(io, w, m, m == l, split ? lo : 0, split ? hi : l, tot);
  return st;
}

}  // namespace causal_ot
