// The state of one row's solve on its compacted live keys, shared by its phases (the start in
// row_start.h, the series solve in series.h, the joint Newton loop in newton.h, the driver in
// row_driver.h).
#pragma once

#include <cstdint>
#include <limits>

#include "options.h"
#include "team.h"
#include "work.h"

namespace causal_ot {

// What the row's first pass (row_driver.h) already computed: q_j = s_j - kappa log C_j (in
// w.q) and this worker's max of it over the old keys (-inf: none); E_j = e^{q_j - e_ref} (in
// w.a, 0 for fresh keys) and their sum where its guess e_ref was in range (e_ready), and the
// number of this worker's fresh keys (C_j = 0; alone, the diagonal among them). A row with
// masked keys (compacted instead) has none of it.
template <typename T>
struct RowStart {
  bool q_ready = false;
  T qmax = -std::numeric_limits<T>::infinity();
  bool e_ready = false;
  T e_ref = 0, e_sum = 0;
  std::int64_t n_fresh = -1;  // -1: not counted
  // the next row (>= 0) whose scores the pass scanned (w.ahead_*): a team's worker exchanges
  // its part with the first evaluation's sums, after which both hold the whole row's
  std::int64_t ahead_row = -1;
};

// The near keys solved in the start: key near[k] (k < nk, the merged list of both workers) has
// iterate x[k] and, evaluated there at the final zeta, a[k], ld[k], r[k], gi[k] (as newton_pass
// evaluates them). nk = 0: none.
template <typename T>
struct NearKeys {
  const std::int64_t* near = nullptr;
  std::int64_t nk = 0;
  const T *x = nullptr, *a = nullptr, *ld = nullptr, *r = nullptr, *gi = nullptr;
};

template <typename T>
struct RowSolve {
  // the row: m live keys (scores shifted so max = 0, all > -under/omr), this worker's range
  // [lo, hi) of them (all alone), its Work w and the other worker's wo (w alone: each
  // worker's keys live in its own Work, the other's are read where a merged list names them)
  std::int64_t m, lo, hi;
  Work<T>& w;
  const Work<T>& wo;
  Member& me;
  T kappa, omr;
  double tol;
  std::int64_t max_iter;
  T s_abs;  // the largest |score| of the row before the shift (the rounding floor's scale)
  const KernelOptions& opt;
  // the closed-form start (start_sums): the max of q over the old keys, this worker's and the
  // row's, the E_j's sum against qmax_own, P = log sum_old e^{q_j}, the fresh keys
  T qmax_own = -std::numeric_limits<T>::infinity();
  T acc_own = 0;
  T qmax = -std::numeric_limits<T>::infinity();
  T P = -std::numeric_limits<T>::infinity();
  std::int64_t nf_own = 0, nf = 0;
  const std::int64_t* fresh = nullptr;  // the merged list of fresh keys (nf)
  T zeta = 0;
  // the bound on log(a_j / C_j) + zeta over the keys that keep the closed form (inf: none)
  T far_lr = std::numeric_limits<T>::infinity();
  NearKeys<T> near_keys;
  bool series = false;  // solved by the series solve
  int series_its = 0;
  double series_bound = 0;

  T score(std::int64_t j) const { return (j >= lo && j < hi) ? w.s[j] : wo.s[j]; }
  const Work<T>& owner(std::int64_t j) const { return (j >= lo && j < hi) ? w : wo; }
};

}  // namespace causal_ot
