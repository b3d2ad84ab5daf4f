// The team of two workers that share one (batch, head) slice, and its barrier.
//
// Each row from the team's first shared row on is split in two key ranges (split_key); the
// row-level sums (score range, logsumexp, near-key lists, each Newton pass's sums) are
// exchanged at a spinning two-party barrier, and both workers take every scalar decision
// identically from the same numbers, so they need no further messages. The result differs
// from the one-thread solve only by the order of the summations (rounding). The team checks
// its own waiting every kTeamCheck shared rows and dissolves (worker 0 goes on alone) when it
// does not pay, as on cores time-shared with other work.
#pragma once

#include <torch/extension.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "options.h"
#include "work.h"

namespace causal_ot {

// A worker's values and its arrival count share one cache line, its mailbox (one per barrier
// parity, so that a worker one barrier ahead never overwrites values not yet read): the line
// crosses to the other core once per exchange (up to 7 values; the series solve's moments, 17
// values, 9 in float32, take up to three lines, once a row).
constexpr int kMailboxValues = 20;
struct alignas(64) Mailbox {
  std::atomic<std::int64_t> count{0};  // the last barrier published here
  double v[kMailboxValues] = {};
};
struct Team {
  Mailbox box[2][2];  // [barrier parity][worker]
  alignas(64) std::atomic<int> state{0};  // 0 forming, 1 both in, 2 worker 0 went alone
  const void* priv[2] = {nullptr, nullptr};  // each worker's own Work (see run_team)
  void* col[2] = {nullptr, nullptr};   // each worker's copy of the column masses C
  void* lcol[2] = {nullptr, nullptr};  // and of log C (see sync_columns)
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins (cpu_relax) before a waiting worker yields its core: tens of microseconds, several
// rows' work and far longer than a healthy team's waits, yet short enough that two workers
// the scheduler put on one core take turns quickly.
constexpr std::int64_t kSpinsBeforeYield = std::int64_t(1) << 10;
// A team whose workers have not met at an exchange for this long lost step: an error.
constexpr int kLostStepSeconds = 60;

// One worker's view: its team (nullptr: alone, the serial solver), its index, its key range
// of the current row, and how many barriers it has passed.
struct Member {
  Team* tm = nullptr;
  int t = 0;
  std::int64_t lo = 0, hi = 0;
  std::int64_t count = 0;
  double waited = 0.0;  // seconds spent waiting at exchanges (timed only when it had to wait)
  std::int64_t last_split_h = -1;  // the previous row's RowStats::split_h (both the same)
  std::int64_t team_from = 0;      // a team's first shared row (team_start_row)
  double exchange_ns = 0.0;        // the exchange's cost it was chosen from
};

// Publish k values, wait for the other worker to publish its k, read them into other (left
// untouched when alone: the caller fills it with the neutral values of its reductions).
inline void exchange(Member& me, const double* mine, int k, double* other) {
  if (me.tm == nullptr) return;
  TORCH_CHECK(k <= kMailboxValues, "causal OT kernel: too many values in one exchange");
  Team& tm = *me.tm;
  const int par = int(me.count & 1);
  Mailbox& mine_box = tm.box[par][me.t];
  const Mailbox& their = tm.box[par][1 - me.t];
  for (int i = 0; i < k; ++i) mine_box.v[i] = mine[i];
  me.count += 1;
  mine_box.count.store(me.count, std::memory_order_release);
  if (their.count.load(std::memory_order_acquire) >= me.count) {  // no wait
    for (int i = 0; i < k; ++i) other[i] = their.v[i];
    return;
  }
  const auto wait0 = std::chrono::steady_clock::now();
  std::int64_t spins = 0;
  std::chrono::steady_clock::time_point since{};
  while (their.count.load(std::memory_order_acquire) < me.count) {
    cpu_relax();
    if (++spins < kSpinsBeforeYield) continue;
    std::this_thread::yield();  // an oversubscribed machine (see kSpinsBeforeYield)
    // the workers take the same decisions from the same numbers, so they never lose step;
    // were that ever broken, an error (raised to Python by at::parallel_for), not a hang
    if ((spins & 1023) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (since == std::chrono::steady_clock::time_point{}) since = now;
      TORCH_CHECK(now - since < std::chrono::seconds(kLostStepSeconds),
                  "causal OT kernel: the two workers of a team lost step (a bug)");
    }
  }
  me.waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait0).count();
  for (int i = 0; i < k; ++i) other[i] = their.v[i];
}

// Whether the other worker has already published its next exchange (so that this worker's
// next exchange will not wait).
inline bool other_arrived(const Member& me) {
  // (its next barrier, me.count + 1, goes to the mailbox of parity me.count & 1)
  return me.tm != nullptr &&
         me.tm->box[me.count & 1][1 - me.t].count.load(std::memory_order_acquire) > me.count;
}

// The merged list of both workers (worker 0's entries first, on both workers, so that sums
// over it are the same on both); alone: the own list.
template <typename T>
std::int64_t merge_lists(const Member& me, const std::vector<std::int64_t> Work<T>::*list,
                         std::int64_t n_own, std::int64_t n_other, Work<T>& own,
                         std::vector<std::int64_t> Work<T>::*merged, const std::int64_t** out) {
  if (me.tm == nullptr) {
    *out = (own.*list).data();
    return n_own;
  }
  const Work<T>* w0 = static_cast<const Work<T>*>(me.tm->priv[0]);
  const Work<T>* w1 = static_cast<const Work<T>*>(me.tm->priv[1]);
  const std::int64_t n0 = me.t == 0 ? n_own : n_other, n1 = me.t == 0 ? n_other : n_own;
  std::int64_t* dst = (own.*merged).data();
  std::copy_n((w0->*list).data(), n0, dst);
  std::copy_n((w1->*list).data(), n1, dst + n0);
  *out = dst;
  return n0 + n1;
}

// A team's split key for a row of l keys: worker 0 takes [0, h), worker 1 [h, l); a multiple
// of 32 keys (whole vectors and cache lines on each side), or l itself.
inline std::int64_t split_key(std::int64_t l) { return std::min(l, ((l + 1) / 2 + 31) / 32 * 32); }

// A team's column masses: each worker keeps its own copy of C and log C (one array shared by
// both would have the lower range's hardware prefetcher run into the upper range's lines).
// After a row both normalised, split at h, worker 0's copy holds keys [0, h) and worker 1's
// [h, l); after a row worker 0 solved alone, worker 0's holds all. Before row l (keys
// [0, l - 1) carry mass, key l - 1 is new: 0 in both copies) each worker takes from the
// other's copy what it is about to read: in a row split at h, worker 0 the keys [h', h) that
// moved to it since the last split h' (h grows with l), worker 1 its range after a row solved
// alone; worker 0 about to solve a row alone, everything since the last split. (The other
// worker wrote those entries before the exchange that preceded this call, and writes none of
// them until after the next one.)
template <typename T>
void take_columns(const Member& me, std::int64_t from, std::int64_t to) {
  const int o = 1 - me.t;
  const T* sc = static_cast<const T*>(me.tm->col[o]);
  const T* sl = static_cast<const T*>(me.tm->lcol[o]);
  T* dc = static_cast<T*>(me.tm->col[me.t]);
  T* dl = static_cast<T*>(me.tm->lcol[me.t]);
  for (std::int64_t j = from; j < to; ++j) {
    dc[j] = sc[j];
    dl[j] = sl[j];
  }
}

template <typename T>
void sync_columns(const Member& me, std::int64_t l, std::int64_t h, bool split) {
  const std::int64_t last = me.last_split_h;
  if (split && me.t == 0 && last >= 0 && h > last) take_columns<T>(me, last, h);
  if (split && me.t == 1 && last < 0) take_columns<T>(me, h, l - 1);
  if (!split && me.t == 0 && last >= 0) take_columns<T>(me, last, l - 1);
}

// Rows from this length on may be split between the two workers of a team (below it the
// exchanges cost more than the halved arithmetic saves); where an exchange costs more, the
// team starts later (team_start_row).
constexpr std::int64_t kSplitRow = 256;

// The team's first shared row, from what one exchange costs on this machine now. A shared row
// saves half its per-key work (~5-6 ns a key, float64) and pays its exchanges (5-8 a row) and
// its reads of the other worker's keys, each about one transfer of a cache line between the
// two cores: so the row length from which sharing pays grows with that latency, by about
// kTeamRowsPerNs rows per ns of an exchange, rounded (in log scale) to the nearest rung of
// kTeamRowLadder. The cost is measured at each call by worker 0 (the median of three blocks of
// kCalibExchanges exchanges, a few us), whose choice both take; options.exchange_ns replaces
// the measurement and options.team_from the choice.
constexpr int kCalibExchanges = 8;
constexpr double kTeamRowsPerNs = 6.0;
constexpr std::int64_t kTeamRowLadder[7] = {256, 384, 512, 768, 1024, 1536, 2048};
inline std::int64_t team_row_for_cost(double ns) {
  const double want = kTeamRowsPerNs * ns;
  if (!(want > double(kTeamRowLadder[0]))) return kTeamRowLadder[0];  // (NaN too)
  std::int64_t best = kTeamRowLadder[0];
  for (std::int64_t r : kTeamRowLadder)
    if (std::abs(std::log(want / double(r))) < std::abs(std::log(want / double(best)))) best = r;
  return best;
}

inline double measure_exchange_ns(Member& me) {
  double block[3];
  for (double& b : block) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kCalibExchanges; ++k) {
      const double mine[1] = {0.0};
      double other[1];
      exchange(me, mine, 1, other);
    }
    b = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
        kCalibExchanges;
  }
  std::sort(block, block + 3);
  return block[1];
}

inline std::int64_t team_start_row(Member& me, const KernelOptions& opt, double* measured_ns) {
  double ns = measure_exchange_ns(me);
  if (opt.exchange_ns) ns = *opt.exchange_ns;
  std::int64_t row = team_row_for_cost(ns);
  if (opt.team_from) row = std::max<std::int64_t>(kSplitRow, *opt.team_from);
  const double mine[2] = {double(row), ns};
  double other[2] = {0.0, 0.0};
  exchange(me, mine, 2, other);
  if (me.t == 1) {  // worker 0's choice
    row = std::int64_t(other[0]);
    ns = other[1];
  }
  *measured_ns = ns;
  return row;
}

// The team's check, every kTeamCheck shared rows: it dissolves when the two workers together
// waited more than a share of the window (kTeamGiveUp; 1 would be break-even if waiting were
// the only loss, but a shared row's work is also slower than alone), in two windows in a row
// (one window can hold a pause of one worker on time-shared cores). Rows shorter than
// kTeamLongRow dissolve it only at kTeamGiveUpShort: there the exchanges cost about what the
// halved arithmetic saves, so a healthy team waits a third to a half of the window, and an
// oversubscribed machine, where each worker waits while the other is descheduled, about all
// of it. options.team_give_up replaces both shares; below 0 one window dissolves the team.
constexpr std::int64_t kTeamCheck = 64;
constexpr std::int64_t kTeamLongRow = 1024;
constexpr double kTeamGiveUp = 0.7;
constexpr double kTeamGiveUpShort = 0.85;
inline double team_give_up(const KernelOptions& opt, std::int64_t l) {
  if (opt.team_give_up) return *opt.team_give_up;
  return l < kTeamLongRow ? kTeamGiveUpShort : kTeamGiveUp;
}
inline int team_slow_windows(const KernelOptions& opt) {
  return opt.team_give_up && *opt.team_give_up < 0 ? 1 : 2;
}

// CPUs this thread may run on (Linux: its affinity mask; elsewhere not known: 2). A team on
// one CPU, as in a process confined to one core with two torch threads, only takes turns.
inline int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
  return 2;
}

// How long worker 0 waits for worker 1 to join before it solves the slice alone.
constexpr int kJoinWaitMs = 20;

// Whether this worker of an at::parallel_for over two halves is in a team: worker 1 joins
// if worker 0 has not gone alone; worker 0 waits up to kJoinWaitMs for it, then goes alone.
inline bool join_team(Team& team, int t) {
  int expect = 0;
  if (t == 1) return team.state.compare_exchange_strong(expect, 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t spins = 0;
  while (team.state.load(std::memory_order_acquire) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(kJoinWaitMs)) {
    cpu_relax();  // (yielding, as at the exchanges: worker 1 may need this core)
    if (++spins >= kSpinsBeforeYield) std::this_thread::yield();
  }
  return !team.state.compare_exchange_strong(expect, 2);  // nobody came: alone
}

}  // namespace causal_ot
