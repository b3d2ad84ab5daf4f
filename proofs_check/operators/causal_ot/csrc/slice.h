// One (batch, head) slice: its rows in order, the upper triangle's zeros, its statistics;
// and the forward over all slices, one per task of torch's at::parallel_for, or a team of two
// on a single slice.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "options.h"
#include "row_driver.h"
#include "store.h"
#include "team.h"
#include "work.h"

namespace causal_ot {

// What the forward did on one slice (the Python side names them alike: ForwardStats).
struct SliceStats {
  double newton_steps = 0;    // the largest number of Newton steps of a row
  double error_estimate = 0;  // the largest row error estimate
  double converged = 1;       // every row met tol (1) or not (0)
  double fallback_rows = 0;   // rows finished by the safeguarded nested iteration
  double invalid_row = 0;     // 0, or the first invalid row's code (RowStats::bad)
  double team_rows = 0;       // rows the team shared
  double series_rows = 0;     // rows solved by the series solve
  double team_from = 0;       // the team's first shared row (0: no team)
  double exchange_ns = 0;     // the exchange cost it was chosen from (0: no team)
  double guess_rows = 0;      // rows whose first pass kept its E_j (RowStats::e_kept)
};

// Zero half `half` (0: the first, 1: the second, 2: all) of row i's upper triangle
// (stream: by streaming stores).
template <typename T>
void zero_upper(T* ob, std::int64_t n, std::int64_t i, int half, bool stream) {
  T* const zb = ob + i * n + i + 1;
  T* const ze = ob + (i + 1) * n;
  T* const zm = zb + (ze - zb) / 2;
  T* const b = half == 1 ? zm : zb;
  T* const e = half == 0 ? zm : ze;
  if (stream) {
    stream_store<T>(b, static_cast<const T*>(nullptr), e - b);
  } else {
    std::fill(b, e, T(0));
  }
}

// A slice's run through its rows, alone (me.tm == nullptr: every row) or as one worker of a
// team: rows of length >= from = me.team_from (at most n: at least the last row is shared)
// are shared and the shorter ones are worker 0's. The team's zeros: while worker 0 solves the
// short rows alone, worker 1 (idle until the first shared row) zeroes whole rows' upper
// triangles from the top, until worker 0 reaches the hand-over exchange before row `from`;
// there they agree on `filled` (rows [0, filled) done) and whether worker 0 stopped at an
// invalid row. The short rows left over, and the shared rows' zeros, are halved between the
// workers.
template <typename T>
struct SliceRun {
  std::int64_t n;
  T* ob;
  Member& me;
  const KernelOptions& opt;
  bool stream_out;
  bool lead = me.tm == nullptr || me.t == 0;
  bool team = me.tm != nullptr;
  std::int64_t from = me.tm ? std::min(std::max(me.team_from, kSplitRow), n) : kSplitRow;
  std::int64_t filled = 0;  // rows [0, filled) have their upper triangle zeroed
  int slow_windows = 0;     // the team's checks that found it waiting too long, in a row
  std::chrono::steady_clock::time_point window_start = std::chrono::steady_clock::now();
  double waited_before = 0.0;

  // The hand-over exchange before the first shared row (both workers); stopped: worker 0
  // stopped at an invalid short row. Returns whether the slice stops.
  bool hand_over(bool stopped) {
    if (!lead) {
      const std::int64_t cap = opt.zero_ahead ? std::min<std::int64_t>(*opt.zero_ahead, n - 1)
                                              : n - 1;
      while (filled < cap && !other_arrived(me)) zero_upper(ob, n, filled++, 2, stream_out);
    }
    const double mine[2] = {stopped ? 1.0 : 0.0, double(filled)};
    double other[2] = {0.0, 0.0};
    exchange(me, mine, 2, other);
    const bool stop = lead ? stopped : other[0] > 0;
    filled = lead ? std::int64_t(other[1]) : filled;
    if (!stop) {
      for (std::int64_t r = filled; r < from - 1; ++r) zero_upper(ob, n, r, me.t, stream_out);
    }
    return stop;
  }

  // Every kTeamCheck shared rows the team checks that it pays: the two workers' waiting over
  // the window against its length (team time T, useful work T - W_t each, so alone would take
  // about 2T - W_0 - W_1). Both decide from the same exchanged numbers. Returns whether this
  // worker leaves the slice (worker 1 when the team dissolves; worker 0 goes on alone).
  bool team_check(std::int64_t l) {
    const auto now = std::chrono::steady_clock::now();
    const double mine[2] = {me.waited - waited_before,
                            std::chrono::duration<double>(now - window_start).count()};
    double other[2] = {0.0, 0.0};
    exchange(me, mine, 2, other);
    const bool slow = mine[0] + other[0] > team_give_up(opt, l) * std::max(mine[1], other[1]);
    slow_windows = slow ? slow_windows + 1 : 0;
    if (slow_windows >= team_slow_windows(opt)) {
      team = false;  // dissolve: worker 0 solves the remaining rows alone
      if (!lead) return true;
      if (me.last_split_h >= 0) take_columns<T>(me, me.last_split_h, l - 1);
    }
    restart_window();
    return false;
  }

  void restart_window() {
    window_start = std::chrono::steady_clock::now();
    waited_before = me.waited;
  }
};

// A row's statistics into its slice's.
inline void add_row_stats(SliceStats& ss, const RowStats& st, bool shared) {
  ss.team_rows += shared ? 1 : 0;
  ss.newton_steps = std::max(ss.newton_steps, double(st.iters));
  ss.error_estimate = std::max(ss.error_estimate, st.resid);
  ss.converged = (ss.converged > 0 && st.ok) ? 1 : 0;
  ss.fallback_rows += st.fallback ? 1 : 0;
  ss.series_rows += st.series ? 1 : 0;
  ss.guess_rows += st.e_kept ? 1 : 0;
}

// Rows [0, n) of one slice (scores sb, output ob, column masses col and lcol): solve, zero the
// upper triangle (the output is not zero-initialised: one pass over n^2 less), and, on worker
// 0 (or alone), write the slice's statistics.
template <typename T>
void solve_slice(std::int64_t n, const T* sb, T* ob, T* col, T* lcol, const RowParams<T>& prm,
                 Work<T>& w, Member& me, SliceStats* stats, bool stream_out) {
  struct FenceOnExit {  // whichever way this worker leaves (worker 1 has several exits)
    bool on;
    ~FenceOnExit() {
      if (on) stream_fence();
    }
  } fence{stream_out};
  SliceRun<T> run{n, ob, me, prm.opt, stream_out};
  w.e_ref = std::numeric_limits<T>::quiet_NaN();  // (a slice's rows never guess from another's)
  w.ahead_row = -1;
  SliceStats ss;
  Member alone;
  if (run.team && !run.lead && run.hand_over(false)) return;  // worker 1: zeroes, then joins
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t l = i + 1;
    if (run.team && run.lead && l == run.from) run.hand_over(false);
    if (run.team && l > run.from && (l - run.from) % kTeamCheck == 0 && run.team_check(l))
      return;
    const bool shared = run.team && l >= run.from;
    if (!shared && !run.lead) continue;  // worker 1 waits for the next shared row's exchange
    const RowIo<T> io{l, sb + i * n, col, lcol, ob + i * n, stream_out,
                      i + 1 < n ? sb + (i + 1) * n : nullptr,
                      i + 2 < n ? sb + (i + 2) * n : nullptr};
    const RowStats st = solve_row<T>(io, prm, w, shared ? me : alone);
    // the upper triangle: halved between the workers of a shared row, else by whoever solved
    // the row; a team's short rows at the hand-over
    const bool team_short = me.tm != nullptr && l < run.from;
    if (i >= run.filled && !team_short) zero_upper(ob, n, i, shared ? me.t : 2, stream_out);
    if (st.bad) {  // both workers see it (from the exchanged row scan) and stop
      ss.invalid_row = st.bad;
      if (run.team && team_short) {  // worker 1 is still zeroing or at the hand-over: stop it
        run.hand_over(true);
        for (std::int64_t r = run.filled; r <= i; ++r) zero_upper(ob, n, r, 2, stream_out);
      }
      if (run.lead) std::fill(ob + (i + 1) * n, ob + n * n, T(0));
      break;
    }
    // the first window starts after the first shared row: worker 1 waited there for worker
    // 0's unshared rows, which is not the team's cost
    if (shared && l == run.from) run.restart_window();
    if (shared) me.last_split_h = st.split_h;
    add_row_stats(ss, st, shared);
  }
  if (run.lead) {
    ss.team_from = me.tm ? double(run.from) : 0.0;
    ss.exchange_ns = me.tm ? me.exchange_ns : 0.0;
    *stats = ss;
  }
}

// One slice on a team of two workers (one at::parallel_for over its two halves); worker 0
// alone where only one thread comes (a busy pool) or worker 1 does not join in time. Each
// worker's keys live in its own Work and its own copy of the column masses (one shared by both
// would have the lower range's hardware prefetcher run into the upper range's lines).
template <typename T>
void run_team(std::int64_t n, const T* sp, T* op, const RowParams<T>& prm, SliceStats* stats,
              bool stream_out) {
  Team team;
  Work<T> w0, w1;
  w0.resize(n);
  w1.resize(n);
  team.priv[0] = &w0;
  team.priv[1] = &w1;
  std::vector<T> col(n, T(0)), lcol(n, T(0)), col1(n, T(0)), lcol1(n, T(0));
  team.col[0] = col.data();
  team.lcol[0] = lcol.data();
  team.col[1] = col1.data();
  team.lcol[1] = lcol1.data();
  at::parallel_for(0, 2, 1, [&](std::int64_t b0, std::int64_t b1) {
    Member me;
    const bool one_thread = b1 - b0 == 2;  // one thread was given both halves: alone
    me.t = one_thread ? 0 : int(b0);
    if (one_thread || !join_team(team, me.t)) {
      if (me.t == 0) solve_slice<T>(n, sp, op, col.data(), lcol.data(), prm, w0, me, stats,
                                    stream_out);
      return;  // (worker 1 when worker 0 went alone)
    }
    me.tm = &team;
    me.team_from = team_start_row(me, prm.opt, &me.exchange_ns);
    Work<T>& own = me.t == 0 ? w0 : w1;
    solve_slice<T>(n, sp, op, static_cast<T*>(team.col[me.t]), static_cast<T*>(team.lcol[me.t]),
                   prm, own, me, stats, stream_out);
  });
}

// The forward of B slices of n x n scores sp into op, statistics into stats[b].
template <typename T>
void forward_slices(std::int64_t B, std::int64_t n, const T* sp, T* op, double rho, double tol,
                    std::int64_t max_iter, const KernelOptions& opt, SliceStats* stats) {
  const RowParams<T> prm{T(rho / (1.0 - rho)), T(1.0 - rho), tol, max_iter, opt};
  const bool so = stream_output(opt, B * n * n * std::int64_t(sizeof(T)));
  if (B == 1 && n >= kSplitRow && at::get_num_threads() >= 2 && !at::in_parallel_region() &&
      usable_cpus() >= 2) {
    run_team<T>(n, sp, op, prm, stats, so);  // (a slice per thread would leave one idle)
    return;
  }
  at::parallel_for(0, B, 1, [&](std::int64_t b0, std::int64_t b1) {
    Work<T> w;
    w.resize(n);
    std::vector<T> col(n), lcol(n);
    for (std::int64_t b = b0; b < b1; ++b) {
      std::fill(col.begin(), col.end(), T(0));
      std::fill(lcol.begin(), lcol.end(), T(0));
      Member alone;
      solve_slice<T>(n, sp + b * n * n, op + b * n * n, col.data(), lcol.data(), prm, w, alone,
                     stats + b, so);
    }
  });
}

}  // namespace causal_ot
