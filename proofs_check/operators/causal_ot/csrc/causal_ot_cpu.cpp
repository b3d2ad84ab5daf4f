// Compiled CPU kernels of the prefix-consistent causal OT operator (docs/theory.md §2, Lemma 2.1).
//
// Row l of the operator solves, over its live keys j (finite score, j <= l), with
// kappa = rho / (1 - rho) and the column masses C_j = C[l-1, j] of the earlier rows,
//
//     x_j + kappa log(C_j + e^{x_j}) + zeta - s_j = 0,     sum_j e^{x_j} = 1,
//
// (x_j = log a[l, j], zeta = log Z_l).  The forward solves it row by row (rows in order, one
// (batch, head) slice per task of torch's own at::parallel_for; a single slice on two or more
// threads is shared by a team of two workers, each row's keys split between them and the
// row-level sums exchanged, see Team) by a joint Newton iteration on
// (x, zeta) from a closed-form start, each iterate clamped to the per-key upper bound of its
// root; a safeguarded nested iteration takes over if that has not converged.  Long rows are
// solved without that iteration where they can be: the keys far from their column mass
// have their root as a power series in one variable, so zeta and the few near keys are
// solved first, by a small Newton iteration, and every weight is then written in one pass
// (the series solve in solve_compact).  The backward
// differentiates each row's optimality conditions and sweeps the rows in reverse.
// The Python side: proofs_check/operators/causal_ot/_compiled.py.
//
// Transcendentals: the exp/log below are written for this file so that the compiler can
// vectorise the key loops (-O3 -march=native): range reduction plus a polynomial, relative
// error ~2 ulp in float64 and float32 (tested against torch.exp / torch.log by the tests).
// After the first Newton step most passes need none of them: a scan finds the pass's largest
// key move and a_j, log D_j are updated by expm1/log1p Taylor polynomials of the degree that
// move needs (kPolyLimit), fresh exp/log only beyond 1/8.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace {

template <typename T> struct Bits;
template <> struct Bits<double> { using U = std::uint64_t; };
template <> struct Bits<float> { using U = std::uint32_t; };

template <typename T>
inline typename Bits<T>::U to_bits(T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof(T));
  return u;
}
template <typename T>
inline T from_bits(typename Bits<T>::U u) {
  T x;
  std::memcpy(&x, &u, sizeof(T));
  return x;
}

// exp's range reduction: x (clamped to the normal range) = k log 2 + r, |r| <= 0.347; t holds
// k in its low mantissa bits (for exp_scale).
constexpr double kExpLo = -708.3, kExpHi = 709.7;
constexpr double kExpShifter = 6755399441055744.0;  // 1.5 * 2^52: rounds to an integer
__attribute__((always_inline)) inline double exp_reduce(double x, double& t) {
  double xc = x < kExpLo ? kExpLo : (x > kExpHi ? kExpHi : x);
  t = xc * 1.4426950408889634 + kExpShifter;
  double k = t - kExpShifter;
  double r = xc - k * 6.93147180369123816490e-01;
  return r - k * 1.90821492927058770002e-10;
}
// e^r 2^k from the polynomial p = e^r; 0 below the normal range
__attribute__((always_inline)) inline double exp_scale(double x, double t, double p) {
  std::uint64_t kb = to_bits(t) - to_bits(kExpShifter);  // k as a two's-complement integer
  double scale = from_bits<double>((kb + 1023ULL) << 52);
  return x < kExpLo ? 0.0 : p * scale;
}

// exp(x); returns 0 below the normal range (x < log(min normal)), +inf never (clamped).
__attribute__((always_inline)) inline double fexp(double x) {
  double t;
  const double r = exp_reduce(x, t);
  // e^r on |r| <= 0.347: Taylor to degree 12 (truncation < 2e-16 relative)
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return exp_scale(x, t, p);
}

__attribute__((always_inline)) inline float fexp(float x) {
  const float lo = -87.3f, hi = 88.7f;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  const float shifter = 12582912.0f;  // 1.5 * 2^23
  float t = xc * 1.44269504f + shifter;
  float k = t - shifter;
  float r = xc - k * 0.693145752f;
  r = r - k * 1.42860677e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  std::uint32_t kb = to_bits(t) - to_bits(shifter);
  float scale = from_bits<float>((kb + 127U) << 23);
  float y = p * scale;
  return x < lo ? 0.0f : y;
}

// log's range reduction: x = m 2^e with m in [sqrt(1/2), sqrt(2)); returns f = (m-1)/(m+1)
// (log m = 2 atanh f, |f| <= 0.1716) and e.
__attribute__((always_inline)) inline double log_reduce(double x, double& e) {
  std::uint64_t u = to_bits(x);
  std::uint64_t eb = u >> 52;  // biased exponent (x > 0)
  double m = from_bits<double>((u & 0x000FFFFFFFFFFFFFULL) | 0x3FF0000000000000ULL);
  e = from_bits<double>(eb | 0x4330000000000000ULL) - 4503599627370496.0 - 1023.0;
  bool big = m > 1.4142135623730951;
  m = big ? 0.5 * m : m;
  e = big ? e + 1.0 : e;
  return (m - 1.0) / (m + 1.0);
}
// e log 2 + 2 f p, log 2 in two parts
__attribute__((always_inline)) inline double log_finish(double e, double f, double p) {
  return e * 6.93147180369123816490e-01 + (e * 1.90821492927058770002e-10 + 2.0 * f * p);
}

// log(x) for x >= min normal (callers clamp); log(m 2^e) = e log 2 + 2 atanh((m-1)/(m+1)).
__attribute__((always_inline)) inline double flog(double x) {
  double e;
  const double f = log_reduce(x, e);
  double s = f * f;
  // 2 atanh(f) = 2 f (1 + s/3 + s^2/5 + ...), |f| <= 0.1716, s <= 0.0295
  double p = 1.0 / 23.0;
  p = p * s + 1.0 / 21.0;
  p = p * s + 1.0 / 19.0;
  p = p * s + 1.0 / 17.0;
  p = p * s + 1.0 / 15.0;
  p = p * s + 1.0 / 13.0;
  p = p * s + 1.0 / 11.0;
  p = p * s + 1.0 / 9.0;
  p = p * s + 1.0 / 7.0;
  p = p * s + 1.0 / 5.0;
  p = p * s + 1.0 / 3.0;
  p = p * s + 1.0;
  return log_finish(e, f, p);
}

__attribute__((always_inline)) inline float flog(float x) {
  std::uint32_t u = to_bits(x);
  std::uint32_t eb = u >> 23;
  float m = from_bits<float>((u & 0x007FFFFFU) | 0x3F800000U);
  float e = from_bits<float>(eb | 0x4B000000U) - 8388608.0f - 127.0f;
  bool big = m > 1.41421356f;
  m = big ? 0.5f * m : m;
  e = big ? e + 1.0f : e;
  float f = (m - 1.0f) / (m + 1.0f);
  float s = f * f;
  float p = 1.0f / 9.0f;
  p = p * s + 1.0f / 7.0f;
  p = p * s + 1.0f / 5.0f;
  p = p * s + 1.0f / 3.0f;
  p = p * s + 1.0f;
  return e * 0.693145752f + (e * 1.42860677e-06f + 2.0f * f * p);
}

// The same exp and log with the polynomials by Estrin's scheme (products of r^2, r^4, r^8
// instead of one chain of fused multiply-adds): a few more operations, about half the
// latency (~20 cycles of dependent FMAs instead of ~50). For short loops whose every step
// waits on the last one (the near keys' Newton loop); float keeps its short Horner forms.
__attribute__((always_inline)) inline double fexp_lat(double x) {
  double t;
  const double r = exp_reduce(x, t);
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double a0 = 1.0 + r, a1 = 0.5 + r * (1.0 / 6.0), a2 = 1.0 / 24.0 + r * (1.0 / 120.0);
  const double a3 = 1.0 / 720.0 + r * (1.0 / 5040.0), a4 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
  const double a5 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0), a6 = 1.0 / 479001600.0;
  const double b0 = a0 + a1 * r2, b1 = a2 + a3 * r2, b2 = a4 + a5 * r2;
  const double d0 = b0 + b1 * r4, d1 = b2 + a6 * r4;
  return exp_scale(x, t, d0 + d1 * r8);
}

__attribute__((always_inline)) inline double flog_lat(double x) {
  double e;
  const double f = log_reduce(x, e);
  double s = f * f;
  const double s2 = s * s, s4 = s2 * s2, s8 = s4 * s4;
  const double a0 = 1.0 + s * (1.0 / 3.0), a1 = 1.0 / 5.0 + s * (1.0 / 7.0);
  const double a2 = 1.0 / 9.0 + s * (1.0 / 11.0), a3 = 1.0 / 13.0 + s * (1.0 / 15.0);
  const double a4 = 1.0 / 17.0 + s * (1.0 / 19.0), a5 = 1.0 / 21.0 + s * (1.0 / 23.0);
  const double b0 = a0 + a1 * s2, b1 = a2 + a3 * s2, b2 = a4 + a5 * s2;
  return log_finish(e, f, (b0 + b1 * s4) + b2 * s8);
}

__attribute__((always_inline)) inline float fexp_lat(float x) { return fexp(x); }
__attribute__((always_inline)) inline float flog_lat(float x) { return flog(x); }

template <typename T>
struct Lim {
  static constexpr T tiny = std::numeric_limits<T>::min();
  static constexpr T eps = std::numeric_limits<T>::epsilon();
  // a key whose weight is below e^{-under} is flushed to exactly 0 (below the normal range)
  static constexpr T under = std::is_same<T, double>::value ? T(708) : T(87);
};

struct RowStats {
  int iters = 0;       // Newton iterations used (joint + safeguarded)
  double resid = 0.0;  // bound on the final error of x and zeta (see solve_compact)
  bool ok = true;      // reached tol
  bool fallback = false;
  int bad = 0;         // invalid row: 1 NaN score, 2 +inf score, 3 every key masked
  std::int64_t split_h = -1;  // a team's row normalised by both: its split key (-1: by one)
  bool series = false;  // solved by the series solve (solve_compact)
  bool e_kept = false;  // solve_row's fused pass kept its E_j (its guess e_ref in range)
};

constexpr std::int64_t kMaxNear = 128;  // near keys solved inside the start (see below)
// The near-key loops run on a multiple of kNearPad lanes (one 512-bit vector: 8 doubles, 16
// floats; 16 doubles cost 15% at n = 512, rho = 0.99, with ~6 near keys per row), the extra
// lanes holding exact no-op keys (score -1e30, C = 1: root at the bound, weight 0), so that a
// handful of near keys still takes the vector path rather than the scalar remainder loop.
template <typename T>
constexpr std::int64_t kNearPad = 64 / std::int64_t(sizeof(T));

// A view of one per-key array inside Work's block.
template <typename T>
struct Arr {
  T* p = nullptr;
  std::int64_t n = 0;
  T* data() const { return p; }
  T& operator[](std::int64_t i) const { return p[i]; }
  std::int64_t size() const { return n; }
};

// Work buffers for one row of up to m live keys. The per-key arrays, which the passes read
// and write together (and o, the normalised weights staged for streaming stores), share one
// 64-byte-aligned block at staggered offsets: array k starts
// k * 192 bytes further into the 4 KiB set-index range of the L1 cache than it would at equal
// sizes. Separately allocated arrays of n = 512 or 2048 doubles start at the same offset
// modulo 4 KiB, so key j of every array falls into the same L1 set; measured: one process in
// three to five ran 20-25% slower, depending on where malloc put the arrays.
template <typename T>
struct Work {
  std::vector<T> block;
  Arr<T> s, c, lc, q, x, r, gi, a, ld, o;
  std::vector<T> ns, nc, nlc, nx, nr, ngi, na, nld;
  std::vector<T> keep;  // the near solve's state, kept while the series solve runs
  std::vector<std::int64_t> idx, fresh, near, exc, fresh_m, near_m, nearb, nearb_m, near_all;
  // the previous row's max of q (solve_row's fused first pass takes it as its guess of this
  // row's, for E_j = e^{q_j - e_ref}); NaN: none (a slice's or a stream call's first row)
  T e_ref = std::numeric_limits<T>::quiet_NaN();
  // the next row's score range and NaN flag (> 0), scanned by this row's first pass
  // (solve_row), valid for row ahead_row only (-1: none)
  std::int64_t ahead_row = -1;
  T ahead_max = 0, ahead_min = 0, ahead_nan = 0;
  void resize(std::int64_t m) {
    constexpr std::int64_t line = 64 / std::int64_t(sizeof(T));   // elements per cache line
    const std::int64_t stride = (m + 63) / 64 * 64 + 3 * line;      // + 192 bytes per array
    Arr<T>* arrs[10] = {&s, &c, &lc, &q, &x, &r, &gi, &a, &ld, &o};
    block.assign(std::size_t(10 * stride + line), T(0));
    const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(block.data());
    T* p0 = block.data() + ((64 - base % 64) % 64) / sizeof(T);  // 64-byte aligned
    for (int k = 0; k < 10; ++k) *arrs[k] = Arr<T>{p0 + k * stride, m};
    ns.resize(kMaxNear + kNearPad<T>); nc.resize(kMaxNear + kNearPad<T>);
    nlc.resize(kMaxNear + kNearPad<T>); nx.resize(kMaxNear + kNearPad<T>);
    nr.resize(kMaxNear + kNearPad<T>); ngi.resize(kMaxNear + kNearPad<T>);
    na.resize(kMaxNear + kNearPad<T>); nld.resize(kMaxNear + kNearPad<T>);
    idx.resize(m);
    fresh.resize(m);
    near.resize(m);
    exc.resize(m);
    fresh_m.resize(m);
    near_m.resize(m);
    nearb.resize(m);
    nearb_m.resize(m);
    near_all.resize(kMaxNear);
    keep.resize(5 * kMaxNear);
  }
};

// Two workers on one (batch, head) slice: each row's keys split in two ranges, the row-level
// sums exchanged at a two-party barrier (a monotone arrival counter per worker, spinning).
// Both workers then do identical scalar work on identical data (the same operations in the
// same order), so they take the same decisions without further messages.
// A worker's values and its arrival count share one cache line, its mailbox (one per barrier
// parity, so that a worker one barrier ahead never overwrites values not yet read): the line
// crosses to the other core once per exchange, not twice (an exchange of up to 7 values; the
// series solve's moments, 17 values (9 in float32), take up to three lines, once a row).
struct alignas(64) Mailbox {
  std::atomic<std::int64_t> count{0};  // the last barrier published here
  double v[20] = {};
};
constexpr int kMailboxValues = 20;
struct Team {
  Mailbox box[2][2];  // [barrier parity][worker]
  alignas(64) std::atomic<int> state{0};  // 0 forming, 1 both in, 2 worker 0 went alone
  const void* priv[2] = {nullptr, nullptr};  // each worker's own Work (see forward_impl)
  void* col[2] = {nullptr, nullptr};   // each worker's copy of the column masses C
  void* lcol[2] = {nullptr, nullptr};  // and of log C (see sync_columns)
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins (cpu_relax) before a waiting worker yields its core. 2^10 pauses are ~27 us on an AMD
// EPYC (Zen 5) VM, several rows' work, and a healthy team's waits are far shorter, so it
// rarely yields; 2^16 (1.7-1.8 ms there, as before) made every exchange cost that whenever
// both workers shared one core (the scheduler's choice on a loaded machine; a process
// confined to one CPU no longer forms a team, see usable_cpus): one head at n = 2048,
// rho = 0.99, a team forced onto one core by `taskset -c 0` took 1.64-1.67 s a call (until it
// dissolved after its first two windows, 128 rows), 57-61 ms with 2^10; the softmax 34-51 ms.
// On two free cores: A/B 0.998-1.020 against 2^16 (A/A 0.985-1.032) at n = 512-2048
// (2026-12-03).
constexpr std::int64_t kSpinsBeforeYield = std::int64_t(1) << 10;

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
      TORCH_CHECK(now - since < std::chrono::seconds(60),
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

// Newton step size measure: keys with a_j below this contribute nothing measurable.
template <typename T>
inline T counted_floor(T tol) { return std::log(tol) - T(30); }

// Safeguarded nested solve (fallback): for each zeta, every key's scalar convex equation by
// Newton from its upper bound (monotone from above); zeta by bracketed Newton on
// u(zeta) = log sum_j a_j(zeta) (slope in [-1, -(1-rho)]).
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

// Small-argument expm1 and log1p, used to update a_j = e^{x_j} and log(C_j + a_j) along small
// Newton steps without fresh transcendentals (range reduction, division). Three levels by the
// largest step |d| of the pass (kPolyLimit), Taylor degrees chosen so that the truncation
// |d|^n / (n+1)! (expm1) and |u|^n / (n+1) (log1p, |u| <= expm1(|d|)) stays below 2^-53
// relative in float64 and 2^-24 in float32:
//   level 1: |d| <= 1/8    float64 degrees 10 / 17 (2.3e-17, 8e-17)   float32 7 / 9
//   level 2: |d| <= 2^-6   float64 degrees  7 /  9 (5.6e-18, 6e-18)   float32 4 / 4
//   level 3: |d| <= 2^-12  float64 degrees  4 /  5 (3e-17, 1.4e-19)   float32 2 / 2
constexpr double kPolyLimit[4] = {0.0, 1.0 / 8.0, 1.0 / 64.0, 1.0 / 4096.0};

template <typename T, int LEVEL>
struct PolyDeg {
  static constexpr bool f32 = std::is_same<T, float>::value;
  static constexpr int e = LEVEL == 1 ? (f32 ? 7 : 10) : LEVEL == 2 ? (f32 ? 4 : 7) : (f32 ? 2 : 4);
  static constexpr int l = LEVEL == 1 ? (f32 ? 9 : 17) : LEVEL == 2 ? (f32 ? 4 : 9) : (f32 ? 2 : 5);
};

// Taylor coefficients as compile-time tables (so the Horner loops unroll inside SIMD loops)
template <int DEG>
struct Coef {
  double e[DEG + 1] = {};  // e[k] = 1 / k!
  double l[DEG + 1] = {};  // l[k] = (-1)^{k+1} / k
  constexpr Coef() {
    double f = 1.0;
    for (int k = 1; k <= DEG; ++k) {
      f /= k;
      e[k] = f;
      l[k] = (k % 2 ? 1.0 : -1.0) / k;
    }
  }
};

template <typename T, int DEG>
inline T expm1_poly(T d) {  // sum_{k=1}^{DEG} d^k / k!, Horner
  constexpr Coef<DEG> c{};
  T p = T(c.e[DEG]);
#pragma GCC unroll 20
  for (int k = DEG - 1; k >= 1; --k) p = p * d + T(c.e[k]);
  return p * d;
}
template <typename T, int DEG>
inline T log1p_poly(T u) {  // sum_{k=1}^{DEG} (-1)^{k+1} u^k / k, Horner
  constexpr Coef<DEG> c{};
  T p = T(c.l[DEG]);
#pragma GCC unroll 20
  for (int k = DEG - 1; k >= 1; --k) p = p * u + T(c.l[k]);
  return p * u;
}
template <typename T, int LEVEL = 1>
inline T expm1_small(T d) { return expm1_poly<T, PolyDeg<T, LEVEL>::e>(d); }
template <typename T, int LEVEL = 1>
inline T log1p_small(T u) { return log1p_poly<T, PolyDeg<T, LEVEL>::l>(u); }

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
// it-th) produced, prev the step before it (see the stopping rule in solve_compact). It grows
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

// One merged Newton pass: apply the step (dx_j = -(r_j + dz) g_j^{-1}, clamped to the upper
// bound of the root at the new zeta nz), then evaluate the new iterate (a_j, log D_j, 1/g_j,
// r_j) and the sums of the next step. POLY: update a_j and log D_j from the old values with
// expm1/log1p polynomials of level POLY, valid for |step| <= kPolyLimit[POLY] (the caller
// checks mall after the pass); POLY = 0: fresh exp/log for every key. EXC: a key that steps
// further is flagged instead (a_j = -1, left out of the sums) and evaluated fresh after the
// loop (w's exc list); the checks cost 20% of a polynomial pass, so only where the
// caller expects such keys. FINAL: the row's last pass (the caller has bounded its step so
// that the row stops after it): x_j, a_j, log D_j and sum a only, none of what a next step
// would need (1/g_j, r_j: a division and two sums less a key).
template <typename T, int POLY, bool EXC = false, bool FINAL = false>
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
  constexpr bool STAT = POLY >= 2 && !FINAL;
  T sum_a = 0, sum_p = 0, sum_pr = 0, mdx = 0, mall = 0, n_bad = 0, mrg = 0, mg = 0;
  if (FINAL) {
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

// Indices j in [lo, hi) with pred(j), in order, into out; returns their count. Each block of 32
// keys is tested by one vectorised loop that sets bit i for key b + i, and the hits (few per
// row) are read off the bits; the last, partial block key by key.
template <typename Pred>
std::int64_t gather_if(std::int64_t lo, std::int64_t hi, std::int64_t* __restrict out, Pred pred) {
  constexpr std::int64_t kBlock = 32;
  std::int64_t n = 0, b = lo;
  for (; b + kBlock <= hi; b += kBlock) {
    std::uint32_t bits = 0;
#pragma omp simd reduction(| : bits)
    for (std::int64_t i = 0; i < kBlock; ++i) bits |= std::uint32_t(pred(b + i) ? 1 : 0) << i;
    while (bits) {
      out[n++] = b + __builtin_ctz(bits);
      bits &= bits - 1;
    }
  }
  for (std::int64_t j = b; j < hi; ++j) {  // branchless: write every index, advance on a hit
    out[n] = j;
    n += pred(j) ? 1 : 0;
  }
  return n;
}

// The start pass's log1p levels: |u| = a_j / C_j up to expm1(kPolyLimit[L]), the range the
// level-L log1p polynomial was sized for (see kPolyLimit).
constexpr double kStartLimit[3] = {0.0, 0.1331484530668263, 0.0157477085866857};

// The near keys solved in the start: key near[k] (k < nk, the merged list of both workers) has
// iterate x[k] and, evaluated there at the final zeta, a[k], ld[k], r[k], gi[k] (as newton_pass
// evaluates them). nk = 0: none.
template <typename T>
struct NearKeys {
  const std::int64_t* near = nullptr;
  std::int64_t nk = 0;
  const T *x = nullptr, *a = nullptr, *ld = nullptr, *r = nullptr, *gi = nullptr;
};

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
  // scale is below e^{under - 40}; beyond, such keys are evaluated fresh (measured: a float32
  // row at rho = 0.9, score std 100, qmax - zeta = 80, kept a key of weight 4.4e-5 at 0 through
  // the polynomial passes, which never refresh a_j = 0)
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

// The far keys' series (the series solve in solve_compact). The root u(w) of u (1 + u)^kappa
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

// Whether rows take the series solve: PROOFS_CHECK_SERIES=0 never (tests compare the two),
// read once per call (read_series_env) and by every row from here. Likewise whether rows take
// solve_row's fused first pass: PROOFS_CHECK_FUSED=0 never (the scan, the copy and the E pass
// apart, each row's scores scanned by itself, as before 2026-12-04).
std::atomic<bool> g_series_on{true};
std::atomic<bool> g_fused_on{true};
inline void read_series_env() {
  const char* v = std::getenv("PROOFS_CHECK_SERIES");
  g_series_on.store(!(v && *v == '0'), std::memory_order_relaxed);
  const char* f = std::getenv("PROOFS_CHECK_FUSED");
  g_fused_on.store(!(f && *f == '0'), std::memory_order_relaxed);
}
inline bool series_on() { return g_series_on.load(std::memory_order_relaxed); }
inline bool fused_on() { return g_fused_on.load(std::memory_order_relaxed); }

// The row's weights once its zeta and near keys are solved (the series solve in solve_compact):
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

// The near solves' Newton step on the row's mass tot (at zeta): on log(tot) = 0, whose
// numerator is tot log tot, while tot is far from 1 (a start far off overshot otherwise); on
// tot = 1, numerator tot - 1 (the joint loop's), once |tot - 1| <= 2^-6, where both converge
// quadratically and the scalar log, a chain of ~45 cycles each step waits on, is not needed.
template <typename T>
inline T near_mass_term(T tot) {
  const T e = tot - T(1);
  return std::abs(e) <= T(1.0 / 64) ? e : tot * flog_lat(std::max(tot, Lim<T>::tiny));
}

// One joint Newton step on the near keys (solve_compact's near solves): each key's x moved
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

// Rows from this many keys on take the series solve (solve_compact): alone from 256, in a team
// from 640, where its second near solve runs on both workers while the passes it saves were
// halved. Measured (AMD EPYC VM, 2026-12-03, A/B against the joint loop alone, interleaved
// medians of 15-21 calls): 8 heads float64 at n = 512 (alone), from 384 / 256 / 128: 0.959 /
// 0.935 / 0.945 at rho 0.99, 0.979 / 0.985 / 0.995 at 0.3; one head at n = 512 (a team from
// row 256) from 384: 1.03 (rho 0.99), 1.06 (0.3); one head at 1024, rho 0.99, from 384 / 640 /
// 1024: 0.972 / 0.950 / 1.013; at 2048: 0.847 / 0.842 / 0.855.
constexpr std::int64_t kSeriesMinRow = 256;
constexpr std::int64_t kSeriesMinTeamRow = 640;
// A key is far if (1 + kappa) w_j <= kSeriesCut at the first near solve's zeta, and the
// series is used if (1 + kappa) w_j <= kSeriesMax holds for every far key at the final zeta.
constexpr double kSeriesCut = 0.04, kSeriesMax = 0.05;

// E_j = e^{q_j - ref} over the keys [lo, hi) (0 for fresh keys, q_j = inf) into w.a; returns
// their sum (the start's P sum, solve_compact)
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

// Where the E_j of solve_row's fused pass may lie against the max of q: e_ref at least this
// far below it (their sum over up to ~1e6 keys stays finite: e^300 in float64, e^40 in float32)
template <typename T>
constexpr T kERefHi = sizeof(T) == 8 ? T(300) : T(40);

// What solve_row's first pass over the row already computed, for solve_compact: q_j = s_j -
// kappa log C_j (in w.q) and this worker's max of it over the old keys (-inf: none); in its
// fused form (fused_on) also E_j = e^{q_j - e_ref} (in w.a, 0 for fresh keys) and their sum
// where e_ref was in range (e_ready), and the number of this worker's fresh keys (C_j = 0;
// alone, the diagonal among them).
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

// One row on its m live keys (compacted): scores s (shifted so max = 0, all > -under/omr),
// column masses c (>= 0) and lc = log c (any value where c = 0). On return a holds the
// (unnormalised) weights e^{x_j} and ld = log(c_j + a_j) (x_j where c_j = 0); returns sum a.
template <typename T>
T solve_compact(std::int64_t m, Work<T>& w, Member& me, T kappa, T omr, double tol,
                std::int64_t max_iter, T s_abs, const RowStart<T>& rs, RowStats& st) {
  // this worker's keys: all of them alone, its range in a team (row-level sums exchanged)
  const std::int64_t lo = me.tm ? me.lo : 0, hi = me.tm ? me.hi : m;
  T* __restrict s = w.s.data();
  T* __restrict c = w.c.data();
  T* __restrict lc = w.lc.data();
  T* __restrict q = w.q.data();
  T* __restrict x = w.x.data();
  T* __restrict r = w.r.data();
  T* __restrict gi = w.gi.data();
  // each worker's keys live in its own Work (see forward_impl): the other worker's keys, which
  // the merged near and fresh lists hold, are read from the other's
  const Work<T>& wo = me.tm ? *static_cast<const Work<T>*>(me.tm->priv[1 - me.t]) : w;
  auto sv = [&](std::int64_t j) { return (j >= lo && j < hi) ? s[j] : wo.s[j]; };
  const T inf = std::numeric_limits<T>::infinity();
  // --- closed-form start: old keys keep their potential, q_j = s_j - kappa log C_j; fresh
  // keys (C_j = 0) solve x = (1-rho)(s_j - zeta) exactly.
  // (rs.q_ready: the caller's first pass computed q and this worker's max of it)
  T qmax_own = rs.q_ready ? rs.qmax : -inf;
  if (!rs.q_ready) {
#pragma omp simd reduction(max : qmax_own)
    for (std::int64_t j = lo; j < hi; ++j) {
      const T qj = c[j] > 0 ? s[j] - kappa * lc[j] : inf;
      q[j] = qj;
      qmax_own = std::max(qmax_own, c[j] > 0 ? qj : -inf);
    }
  }
  // fresh keys (C_j = 0): the diagonal, and keys never given mass (alone, with one counted by
  // the caller's pass, that is the diagonal: no gather)
  std::int64_t nf_own = 1;
  if (!me.tm && rs.n_fresh == 1 && !(c[m - 1] > 0))
    w.fresh[0] = m - 1;
  else
    nf_own = gather_if(lo, hi, w.fresh.data(), [&](std::int64_t j) { return !(c[j] > 0); });
  // E_j = e^{q_j - qmax_own} below, with qmax_own from here on the reference of the E_j: the
  // caller's e_ref where its pass computed them (e_ref within [max q - kERefHi<T>, max q + 8],
  // see solve_row: no overflow, and every later use of qmax_own as the E_j's scale holds)
  T acc_own = 0;
  if (rs.e_ready && qmax_own > -inf) {
    acc_own = rs.e_sum;
    qmax_own = rs.e_ref;
  } else if (qmax_own > -inf) {
    acc_own = e_pass<T>(lo, hi, w, qmax_own);  // E_j, kept in w.a for the start pass
  }
  T qmax = qmax_own, P = -inf;
  std::int64_t nf_other = 0;
  {
    const double mine[3] = {double(qmax_own), double(acc_own), double(nf_own)};
    double other[3] = {-double(inf), 0.0, 0.0};
    exchange(me, mine, 3, other);
    const T qmax_other = T(other[0]);
    qmax = std::max(qmax_own, qmax_other);
    nf_other = std::int64_t(other[2]);
    if (qmax > -inf) {
      T acc = qmax_own > -inf ? acc_own * std::exp(qmax_own - qmax) : T(0);
      if (qmax_other > -inf) acc += T(other[1]) * std::exp(qmax_other - qmax);
      P = qmax + std::log(acc);
    }
  }
  const std::int64_t* fresh = nullptr;
  const std::int64_t nf =
      merge_lists<T>(me, &Work<T>::fresh, nf_own, nf_other, w, &Work<T>::fresh_m, &fresh);
  // zeta: the root of E(z) + R(z) = 1, E = e^{P - z} (the old keys at the closed form), R =
  // sum_fresh e^{(1-rho)(s_f - z)}, by Newton on one of two convex decreasing forms of it, so
  // that from z = max(P, max s_f), at or left of the root (E + R >= 1 there), the iterates
  // increase monotonically to it: where E > 0 and R < 0.999, on phi(z) = P - z - log(1 - R)
  // (slope -1 - (1-rho) R/(1 - R): all but linear while R is not close to 1), else on
  // g(z) = log(E + R). On g alone, whose slope is E's while E dominates and R's (1 - rho)
  // once the fresh key holds the mass, a row took 5.1 steps at rho = 0.99 (3.1 at 0.9) to
  // the former stop at 1e-3; with phi and the stop at 3e-2, 2.2 (2.0), and about 200 cycles
  // less per row at n = 255, rho = 0.99 (rdtsc, AMD EPYC VM, 2026-12-03). The stop: after a
  // step d <= 3e-2 zeta is within about K d^2 of the root, K = phi''/(2 |phi'|) = (1-rho)^2 R
  // / (2 (1 - R)(1 - R + (1-rho) R)) (0.004 at rho = 0.99 with R = 0.9, 0.03 at rho = 0.3
  // with R = 0.1), which the near solve or the row's first step absorbs: the near and joint
  // step counts per row were those of the stop at 1e-3 (n = 512 and 2048, rho 0.3/0.9/0.99).
  T zeta = P;
  for (std::int64_t k = 0; k < nf; ++k) zeta = std::max(zeta, sv(fresh[k]));
  for (int k = 0; k < 60; ++k) {
    T e_old = (P > -inf) ? std::exp(P - zeta) : T(0);
    T e_new = 0;
    for (std::int64_t k = 0; k < nf; ++k) e_new += std::exp(omr * (sv(fresh[k]) - zeta));
    T dz;
    if (e_old > 0 && e_new < T(0.999)) {
      const T om = T(1) - e_new;
      dz = (P - zeta - std::log1p(-e_new)) * om / (om + omr * e_new);
    } else {
      const T tot = e_old + e_new;
      dz = std::log(tot) * tot / (e_old + omr * e_new);
    }
    zeta += dz;
    if (!(std::abs(dz) > T(3e-2))) break;
  }
  // Near keys: old keys whose start weight is not small against their column mass
  // ((1 + kappa) a_j / C_j > 0.05 at the upper bound of a_j; 0.15 / sqrt(kappa) from kappa = 9
  // on), where "keeps its potential" is a poor start and the bound overestimates a_j (by up
  // to a factor e^{kappa log(1 + a_j/C_j)}). If there are few, solve them first, with zeta,
  // by the joint Newton step on that small system (the far keys' sum stays the closed form
  // e^{P_far - zeta}); the row's joint Newton then starts close to the root. (It replaced a
  // nested iteration, scalar Newton per near key inside Newton on zeta: 5.5 outer times 3.3
  // inner steps per row at rho = 0.99, against 3 to 7 joint steps; 15% of the forward at
  // n = 512, rho = 0.99.)
  T far_lr = inf;  // no closed-form start pass unless set below
  NearKeys<T> near_keys;  // the near keys solved below, if any
  bool series = false;  // the row solved by the series solve (below)
  int series_its = 0;
  double series_bound = 0;
  if (qmax > -inf) {
    // (the cut lowered at large kappa, 0.15/sqrt(kappa): at rho = 0.99 a key just below 0.05
    // still moved by more than 1/8 in the first joint step once zeta had dropped; measured
    // -6% there at 0.015, no change at rho <= 0.9, where it stays 0.05). The cut is taken at
    // the start's zeta, which the near solve then lowers (on average by 2.2-2.4 at rho = 0.99,
    // 0.75-0.9 at 0.9, 0.03 at 0.3; n = 512 and 2048, score std 1): at rho = 0.99 it holds
    // 11-14 keys where 50-62 pass the cut at the final zeta. Gathering those after the near
    // solve when zeta dropped by more than 0.5 (or 1), and solving them with the others, cut
    // the row's joint steps (the largest per call from 4-5 to 2-3) but cost more than it
    // saved: A/B 1.03-1.25 at rho >= 0.9, n = 512 and 2048, one thread (AMD EPYC VM,
    // 2026-12-03; interleaved medians of 21 calls).
    const T near_frac = std::min(T(0.05), T(0.15) / std::sqrt(kappa));
    const T near_cut = zeta + std::log(near_frac / (T(1) + kappa));
    const std::int64_t nn_own = gather_if(lo, hi, w.near.data(), [&](std::int64_t j) {
      return (c[j] > 0) & (q[j] - lc[j] > near_cut);
    });
    // this worker's share of the far keys' P sum (E_j = e^{q_j - qmax_own}, from the P loop):
    // its P sum less its near keys' (fresh keys have E_j = 0), or directly where that cancels
    // badly (the far keys below 1e-6 of it in float64, 1e-2 in float32). The sum only sets the
    // near solve's far mass, a start that the joint Newton corrects, so the digits lost above
    // that do not matter (same iteration counts at score std 1, 3, 6; with the direct sum
    // from 0.5 down, as before, rho >= 0.9 paid that extra pass in almost every row: 1-4%).
    // Each worker decides for its own keys; only the value is exchanged (both then hold the
    // same sum: a + b = b + a), with the near count (a second exchange less per row).
    T* __restrict ea = w.a.data();
    T acc_nd = 0;
    for (std::int64_t k = 0; k < nn_own; ++k) acc_nd += ea[w.near[k]];
    T acc_fd = acc_own - acc_nd;
    if (!(acc_fd >= T(sizeof(T) == 8 ? 1e-6 : 1e-2) * acc_own)) {
      acc_fd = 0;
#pragma omp simd reduction(+ : acc_fd)
      for (std::int64_t j = lo; j < hi; ++j)
        acc_fd += (c[j] > 0) & !(q[j] - lc[j] > near_cut) ? ea[j] : T(0);
    }
    if (qmax_own > -inf) acc_fd *= std::exp(qmax_own - qmax);  // E_j were against qmax_own
    const double mine[2] = {double(nn_own), double(acc_fd)};
    double other[2] = {0.0, 0.0};
    exchange(me, mine, 2, other);
    const std::int64_t* near = nullptr;
    const std::int64_t nn = merge_lists<T>(me, &Work<T>::near, nn_own, std::int64_t(other[0]),
                                           w, &Work<T>::near_m, &near);
    const bool solve_near = nn > 0 && nn <= kMaxNear;
    // the largest log(a_j / C_j) + zeta at the start over the keys that keep the closed form
    // sets the start pass's log1p degree: those are the far keys (every key if the near ones
    // are not solved), all with q_j - log C_j <= near_cut by definition: the bound serves,
    // except with near keys not solved (more than kMaxNear), where it is the max over all
    far_lr = near_cut;
    if (nn > kMaxNear) {
      T mx_all = -inf;
#pragma omp simd reduction(max : mx_all)
      for (std::int64_t j = lo; j < hi; ++j)
        mx_all = std::max(mx_all, c[j] > 0 ? q[j] - lc[j] : -inf);
      const double mine_mx[1] = {double(mx_all)};
      double other_mx[1] = {-double(inf)};
      exchange(me, mine_mx, 1, other_mx);
      far_lr = std::max(mx_all, T(other_mx[0]));
    }
    if (solve_near) {
      const T acc_far = acc_fd + T(other[1]);  // (a + b = b + a exactly: the same on both)
      const T p_far = acc_far > 0 ? qmax + std::log(acc_far) : -inf;
      // gather the near keys into contiguous buffers: their Newton loops vectorise
      T* __restrict ns = w.ns.data();
      T* __restrict nc = w.nc.data();
      T* __restrict nlc = w.nlc.data();
      T* __restrict nx = w.nx.data();
      const std::int64_t nk = std::int64_t(nn);
      for (std::int64_t k = 0; k < nk; ++k) {
        const std::int64_t j = near[k];
        const bool mine = j >= lo && j < hi;
        const Work<T>& wj = mine ? w : wo;
        ns[k] = wj.s[j];
        nc[k] = wj.c[j];
        nlc[k] = wj.lc[j];
        nx[k] = std::min(wj.q[j] - zeta, omr * (wj.s[j] - zeta));
        if (mine) ea[j] = T(-1);  // marks a near key for the start pass
      }
      const std::int64_t nkp = (nk + kNearPad<T> - 1) / kNearPad<T> * kNearPad<T>;
      for (std::int64_t k = nk; k < nkp; ++k) {  // no-op lanes: dx = 0, a = 0 at every zeta
        ns[k] = T(-1e30);
        nc[k] = T(1);
        nlc[k] = T(0);
        nx[k] = T(-1e30);
      }
      // joint Newton on (near x, zeta), the far keys at their closed form (mass e^{P_far - zeta})
      // and the fresh keys exact: the main loop's step on this small system, each iterate
      // clamped to the per-key upper bound of its root; stopped once a step is below 3e-2
      // (the iterate then within ~1e-3 by quadratic convergence, no further than the far keys'
      // closed-form start is from their roots: the main loop's first step stays polynomial.
      // Measured against 1e-3: -2 to -6% for one head on two threads, -1.5 to -3% alone, one
      // near step less (each ~300 cycles, a chain of exp, log and a division); 1e-4 had cost
      // one step more than 1e-3). Not converged in 30 steps: the main loop starts from here,
      // as from any start. Its exp and log are the low-latency forms (fexp_lat, flog_lat:
      // each step waits on the one before; -2 to -3% at n = 512, rho >= 0.9, -5% at n = 128;
      // measured over 2e6 arguments against long double: 2.3 ulp for exp, 1.1 for log).
      T* __restrict nr = w.nr.data();
      T* __restrict ngi = w.ngi.data();
      T* __restrict na = w.na.data();
      T* __restrict nld = w.nld.data();
      for (std::int64_t k = 0; k < nkp; ++k) { nr[k] = 0; ngi[k] = 0; }
      T dz = 0;
      for (int it = 0; it < 30; ++it) {
        const T nz = zeta + dz;
        const NearSums<T> sums = near_pass<T>(w, nkp, kappa, omr, nz, dz);
        const T sa = sums.sa, sp = sums.sp, spr = sums.spr, mdx = sums.mdx;
        zeta = nz;
        T far = (p_far > -inf) ? fexp_lat(p_far - zeta) : T(0), fr = 0;
        for (std::int64_t kf = 0; kf < nf; ++kf) fr += fexp_lat(omr * (sv(fresh[kf]) - zeta));
        const T step = std::max(std::abs(dz), mdx);
        if (it > 0 && !(step > T(3e-2))) break;
        // Newton on log(mass) = 0 (the mass is a sum of exponentials of zeta: linearised as
        // is, a start far from 1 overshot by ~20 and crept back by 1 per step at score std 6).
        // The first step still overshoots at rho = 0.99 (zeta 10.7 -> 4.3, root 7.2: the far
        // mass e^{P_far - zeta} linearised). Solving log(mass after the step) = 0 exactly,
        // each key's exponent as the step sets it, by 1-3 inner Newton steps, saved 0.75-1.25
        // near steps per row there (0.45 at rho = 0.9) but cost more: A/B 1.02-1.10 at n = 512
        // and 2048, 1.00-1.06 in the first step only (AMD EPYC VM, 2026-12-03).
        const T tot = far + fr + sa;
        dz = (near_mass_term(tot) - spr) / (sp + far + omr * fr);
        // The first step from the start's zeta, where the near keys sit at the upper bounds of
        // their roots, overshoots when it is large and downward (the example above: 6.4 where
        // 3.5 was needed): 0.7 of it when it falls by more than 1. Near evaluations per row at
        // rho = 0.99 5.94 -> 5.00 (n = 512) and 6.06 -> 5.18 (2048), at 0.9 4.43 -> 4.07, at 0.3
        // unchanged (2.99), joint steps unchanged; A/B one thread, n = 512: 0.973 at rho =
        // 0.99 (twice), 0.985 at 0.9, 0.993 at 0.3 (A/A 0.993-1.018), 0.977 at n = 2048, rho =
        // 0.99 (AMD EPYC VM, 2026-12-04; 0.5, 0.6 and 0.8, or from a fall of 0.5, no better).
        if (it == 0 && dz < T(-1)) dz *= T(0.7);
      }
      // the far keys start at the bound at the new zeta, the near keys from their iterates,
      // evaluated there at this zeta by the last pass of the loop above
      near_keys = NearKeys<T>{near, nk, nx, na, nld, nr, ngi};
      // Series solve (long rows). The near solve's zeta z1 is close to the root, but the far
      // keys sit at the closed form x_j = q_j - zeta, off their roots by kappa log(1 + u_j),
      // which the joint loop below took 3-4 passes over every key to fix (at rho = 0.99, n =
      // 2048: 2/3 of a row's time). A far key's root is known in closed form instead: with
      // w_j = e^{q_j - zeta} / C_j, u_j = a_j / C_j is u(w_j), the root of u (1 + u)^kappa = w,
      // a power series in v_j = (1 + kappa) w_j (SeriesCoef). So the far keys' mass at any
      // zeta is sum_k beta_k nu_k y^k, nu_k = sum_far b_j v_j^{k-1} at z1 (b_j = C_j w_j,
      // y = e^{z1 - zeta}): one pass for the moments nu_k, then the near solve again on the
      // near keys and those that pass a second cut at z1 (v_j > kSeriesCut: 15-25 more a row at
      // score std 1), with that far mass, to the row's stopping rule; then one pass writes
      // every key's weight (final_series), and the row is solved. Taken only if the far keys
      // still have v_j <= kSeriesMax at the final zeta; otherwise the joint loop from the
      // first near solve's start, as without it.
      if (m >= (me.tm ? kSeriesMinTeamRow : kSeriesMinRow) && series_on()) {
        const SeriesCoef& sc = series_coef(double(kappa));
        const T z1 = zeta;
        const T cut_b = z1 + std::log(T(kSeriesCut) / (T(1) + kappa));
        const std::int64_t nb_own = gather_if(lo, hi, w.nearb.data(), [&](std::int64_t j) {
          return (c[j] > 0) & (ea[j] >= T(0)) & (q[j] - lc[j] > cut_b);
        });
        // the far keys' moments nu_k = sum b_j v_j^{k-1}, b_j = e^{q_j - z1} = E_j e^{qmax_own -
        // z1}, v_j = (1 + kappa) b_j / C_j (powers by squaring: a chain of 4, not 15); k < 8 in
        // float32 (kSeriesTerms)
        constexpr int nst = kSeriesTerms<T>;
        const T sc_own = qmax_own > -inf ? std::exp(qmax_own - z1) : T(0);
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
        double mine[kSeriesTermsMax + 1] = {double(m0), double(m1), double(m2), double(m3),
                                            double(m4), double(m5), double(m6), double(m7),
                                            double(m8), double(m9), double(m10), double(m11),
                                            double(m12), double(m13), double(m14), double(m15)};
        mine[nst] = double(nb_own);
        double other[kSeriesTermsMax + 1] = {};
        exchange(me, mine, nst + 1, other);  // (and the new near keys' count)
        const std::int64_t* nbl = nullptr;
        const std::int64_t nb = merge_lists<T>(me, &Work<T>::nearb, nb_own, std::int64_t(other[nst]),
                                               w, &Work<T>::nearb_m, &nbl);
        if (nk + nb <= kMaxNear) {
          // gam[k] = c[k] nu_k: the far mass at zeta is sum_k gam[k] y^k, y = e^{z1 - zeta}, and
          // its slope -d/dzeta sum_k k gam[k] y^k (both workers' sums: a + b = b + a exactly)
          T gam[nst + 1];
          for (int k = 1; k <= nst; ++k) gam[k] = T(sc.c[k] * (mine[k - 1] + other[k - 1]));
          T* kp = w.keep.data();  // phase A's near keys, restored if the series solve fails
          std::copy_n(nx, nk, kp);
          std::copy_n(na, nk, kp + kMaxNear);
          std::copy_n(nld, nk, kp + 2 * kMaxNear);
          std::copy_n(nr, nk, kp + 3 * kMaxNear);
          std::copy_n(ngi, nk, kp + 4 * kMaxNear);
          std::int64_t* all = w.near_all.data();
          std::copy_n(near, nk, all);
          std::copy_n(nbl, nb, all + nk);
          for (std::int64_t k = 0; k < nb; ++k) {
            const std::int64_t j = nbl[k];
            const bool mine_j = j >= lo && j < hi;
            const Work<T>& wj = mine_j ? w : wo;
            ns[nk + k] = wj.s[j];
            nc[nk + k] = wj.c[j];
            nlc[nk + k] = wj.lc[j];
            nx[nk + k] = std::min(wj.q[j] - z1, omr * (wj.s[j] - z1));
            nr[nk + k] = 0;
            ngi[nk + k] = 0;
            if (mine_j) ea[j] = T(-1);
          }
          const std::int64_t nt = nk + nb;
          const std::int64_t ntp = (nt + kNearPad<T> - 1) / kNearPad<T> * kNearPad<T>;
          for (std::int64_t k = nt; k < ntp; ++k) {
            ns[k] = T(-1e30);
            nc[k] = T(1);
            nlc[k] = T(0);
            nx[k] = T(-1e30);
            nr[k] = 0;
            ngi[k] = 0;
          }
          T dzb = 0;
          double prev_b = inf;
          bool conv = false;
          double bound_b = inf;
          int its_b = 0;
          // the near solve's loop above on all near keys (the first ones from their iterates at
          // z1, the new ones from their bound there) with the far mass from the series, to
          // the joint loop's stopping rule (newton_error_bound <= tol / 10), in at most max_iter
          // steps (the row's budget of Newton steps, as there)
          const int b_max = int(std::min<std::int64_t>(max_iter, 20));
          for (int it = 1; it <= b_max; ++it) {
            const T nz = zeta + dzb;
            const NearSums<T> sums = near_pass<T>(w, ntp, kappa, omr, nz, dzb);
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
            for (std::int64_t kf = 0; kf < nf; ++kf) fr += fexp_lat(omr * (sv(fresh[kf]) - zeta));
            const double step = std::max(double(std::abs(dzb)), double(mdx));
            its_b = it;
            bound_b = it > 1 ? newton_error_bound(it - 1, step, prev_b) : step;
            if (it > 1 && bound_b <= 0.1 * tol) {
              conv = true;
              break;
            }
            prev_b = it > 1 ? step : inf;
            const T tot = fm + fr + sa;
            dzb = (near_mass_term(tot) - spr) / (sp + fd + omr * fr);
          }
          far_lr = std::min(far_lr, cut_b);  // every far key: q_j - log C_j below both cuts
          // The series holds at the final zeta if every far key's v_j = (1 + kappa) w_j, at
          // most kSeriesCut at z1, is at most kSeriesMax there. And b_j = E_j e^{qmax_own -
          // zeta}: a key whose E_j underflowed in the P loop has b_j < e^{-under} e^{qmax -
          // zeta}, negligible only while qmax - zeta is not large (float32: under = 87; rows
          // with keys of tiny C_j reach it).
          series = conv && T(kSeriesCut) * std::exp(z1 - zeta) <= T(kSeriesMax) &&
                   qmax - std::min(z1, zeta) <= Lim<T>::under - T(40);
          if (series) {
            near_keys = NearKeys<T>{all, nt, nx, na, nld, nr, ngi};
            series_its = its_b;
            series_bound = bound_b;
          } else {  // phase A's start (the new near keys, marked, are evaluated fresh there)
            zeta = z1;
            std::copy_n(kp, nk, nx);
            std::copy_n(kp + kMaxNear, nk, na);
            std::copy_n(kp + 2 * kMaxNear, nk, nld);
            std::copy_n(kp + 3 * kMaxNear, nk, nr);
            std::copy_n(kp + 4 * kMaxNear, nk, ngi);
          }
        }
      }
    }
  }
  const T floor_x = counted_floor<T>(T(tol));
  // first evaluation at the start (a zero step): where the far keys' a_j / C_j allow, from
  // the closed form (start_pass), else fresh exp/log
  PassSums ps;
  const T u_max = far_lr < inf ? std::exp(far_lr - zeta) : inf;
  if (series) {  // solved: the weights at the series root, the near keys' from the near solve
    const SeriesCoef& sc = series_coef(double(kappa));
    ps = PassSums{double(final_series<T>(lo, hi, nf_own, w, kappa, omr, zeta, qmax_own, near_keys, sc)),
                  0.0, 0.0, 0.0, 0.0};
  } else if (u_max <= T(kStartLimit[2])) {
    ps = start_pass<T, 2>(lo, hi, w, kappa, omr, zeta, qmax_own, near_keys);
  } else if (u_max <= T(kStartLimit[1])) {
    ps = start_pass<T, 1>(lo, hi, w, kappa, omr, zeta, qmax_own, near_keys);
  } else {
    start_plain<T>(lo, hi, w, omr, zeta, near_keys);
    ps = newton_pass<T, 0>(lo, hi, w, kappa, omr, T(0), zeta, floor_x);
  }
  // the row's sums from both workers' (sums add, largest moves take the max)
  // (ahead: also this worker's scan of the next row, max, min, NaN flag: both workers then
  // hold the whole next row's; see solve_row)
  auto combine = [&me](PassSums& p, double* ahead = nullptr) {
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
  };
  if (me.tm && rs.ahead_row >= 0) {  // the first exchange after every shared row's first pass
    double ahead[3] = {double(w.ahead_max), double(w.ahead_min), double(w.ahead_nan)};
    combine(ps, ahead);
    w.ahead_max = T(ahead[0]);
    w.ahead_min = T(ahead[1]);
    w.ahead_nan = T(ahead[2]);
    w.ahead_row = rs.ahead_row;
  } else {
    combine(ps);
  }
  if (series) {
    st.iters = series_its;
    st.resid = series_bound;
    st.ok = true;
    st.series = true;
    return T(ps.sum_a);
  }

  // --- joint Newton on (x, zeta), every iterate clamped to the per-key upper bound of its
  // root, min(s_j - zeta - kappa log C_j, (1-rho)(s_j - zeta)); each pass applies one step
  // and evaluates the next.
  const std::int64_t joint_max = std::min<std::int64_t>(max_iter, 40);
  double prev_step = inf;
  bool done = false, stalled = false;
  std::int64_t it = 0;
  for (it = 1; it <= joint_max; ++it) {
    const T dz = T((ps.sum_a - 1.0 - ps.sum_pr) / ps.sum_p);
    const T nz = zeta + dz;
    // polynomial updates where the keys' steps allow them: a scan without transcendentals
    // bounds the steps and picks the level (pass_level; a few keys beyond its limit are
    // evaluated fresh by the pass). Each worker decides for its own keys: the recent ones
    // move most.
    // Once the last pass's maxima bound this step's moves below 2^-12 (next_move_bound; the
    // same on both workers of a team), level 3 needs no scan; and if the bound already meets
    // the stopping rule below, this pass is the row's last (newton_pass FINAL). Measured
    // against the scan and a full last pass (AMD EPYC VM, 2026-12-03, one process, calls
    // interleaved, medians of 21-31; A/A 0.979-1.007): 0.968-0.972 one head, float64, n = 512
    // (rho 0.99), 2048 (0.9, 0.99), 4096 (0.9); 0.941 and 0.979 at rho 0.3 (2048, 512); 0.959
    // for 8 heads at 1024; float32 at 2048, rho 0.99: 0.995. Weights bit-identical in float64
    // (n = 64-2048, rho 0.3-0.99, score std 1 and 6), within 1.8e-7 in float32 (sum a's order).
    const double bnd = next_move_bound(ps, double(dz));
    const bool last = bnd <= kPolyLimit[3] && newton_error_bound(it, bnd, prev_step) <= 0.1 * tol;
    const int poly = bnd <= kPolyLimit[3] ? 3 : pass_level<T>(lo, hi, w, dz);
    ps = last         ? newton_pass<T, 3, false, true>(lo, hi, w, kappa, omr, dz, nz, floor_x)
         : poly == 3  ? newton_pass<T, 3>(lo, hi, w, kappa, omr, dz, nz, floor_x)
         : poly == 2  ? newton_pass<T, 2>(lo, hi, w, kappa, omr, dz, nz, floor_x)
         : poly == 1  ? newton_pass<T, 1>(lo, hi, w, kappa, omr, dz, nz, floor_x)
         : poly == -1 ? newton_pass<T, 1, true>(lo, hi, w, kappa, omr, dz, nz, floor_x)
                      : newton_pass<T, 0>(lo, hi, w, kappa, omr, dz, nz, floor_x);
    if (poly > 0 && ps.mall > kPolyLimit[poly]) {  // rounding moved a key across the bound:
      // the pass again, fresh (this worker's keys only: its own decision)
      for (std::int64_t j = lo; j < hi; ++j) { r[j] = 0; gi[j] = 0; }
      const double mdx = ps.mdx, mall = ps.mall;
      ps = newton_pass<T, 0>(lo, hi, w, kappa, omr, T(0), nz, floor_x);
      ps.mdx = mdx;
      ps.mall = mall;
    }
    combine(ps);
    zeta = nz;
    const double step = std::max(double(std::abs(dz)), ps.mdx);
    if (!std::isfinite(step)) break;
    // a last pass stops the row below (step <= bnd), rounding aside; were it not to, the
    // evaluation that the next step needs, fresh (both workers: a decision on shared numbers)
    if (last && !(newton_error_bound(it, step, prev_step) <= 0.1 * tol)) {
      for (std::int64_t j = lo; j < hi; ++j) { r[j] = 0; gi[j] = 0; }
      const double mdx = ps.mdx, mall = ps.mall;
      ps = newton_pass<T, 0>(lo, hi, w, kappa, omr, T(0), nz, floor_x);
      combine(ps);
      ps.mdx = mdx;
      ps.mall = mall;
    }
    // Stopping rule. The step just taken estimates the error of the previous iterate; with
    // Newton's quadratic convergence e_{k+1} <= K e_k^2 and K estimated by step/prev^2, the
    // new iterate's error is about step^3/prev^2 (times a safety factor 4). Trusted only in
    // the quadratic regime (step < prev/4 and step < 2^-10).
    // Rows are aimed at tol/10: a row's error moves the column masses of every later row,
    // so the operator's error is a sum over rows (measured: up to ~2x one row's estimate).
    const double bound = newton_error_bound(it, step, prev_step);
    if (bound <= 0.1 * tol) {
      st.iters = int(it);
      st.resid = bound;
      done = true;
      break;
    }
    // a tol below what the dtype resolves (x_j = s_j - zeta - kappa log D_j is known only to
    // about eps (|s| + |zeta| + ...)): stop, unconverged, once the steps stop shrinking there
    const double floor = 16.0 * double(Lim<T>::eps) * (1.0 + std::abs(double(zeta)) + s_abs);
    if (step <= floor && step >= 0.5 * prev_step) {
      st.iters = int(it);
      st.resid = step;
      st.ok = step <= tol;  // rows aim at tol/10; a stall between that and tol still meets tol
      stalled = true;
      break;
    }
    prev_step = step;
  }
  if (done) st.ok = true;
  if (done || stalled) return T(ps.sum_a);
  st.iters = int(std::min(it, joint_max));
  st.fallback = true;
  // the fallback is serial: worker 1 leaves the row to worker 0 (both took this branch; the
  // last exchange ordered worker 1's writes before worker 0's reads)
  if (me.tm && me.t == 1) return T(0);
  if (me.tm) {  // worker 0 takes worker 1's keys [hi, m) from worker 1's Work
    for (std::int64_t j = hi; j < m; ++j) {
      s[j] = wo.s[j];
      c[j] = wo.c[j];
      lc[j] = wo.lc[j];
      x[j] = wo.x[j];
    }
  }
  const std::int64_t rest = std::max<std::int64_t>(1, max_iter - joint_max);
  if (max_iter > joint_max || !std::isfinite(zeta)) {
    if (!std::isfinite(zeta)) zeta = 0;
    for (std::int64_t j = 0; j < m; ++j) x[j] = std::isfinite(x[j]) ? x[j] : T(0);
    solve_safe<T>(m, s, c, lc, x, zeta, kappa, omr, tol, rest, st);
  } else {
    st.ok = false;
    st.resid = prev_step;
  }
  // weights and log D at the final x (no step: r = gi = 0, and the clamp is inactive there)
  for (std::int64_t j = 0; j < m; ++j) {
    r[j] = 0;
    gi[j] = 0;
    q[j] = inf;  // only the (1-rho)(s_j - zeta) bound clamps here: the root satisfies it
  }
  ps = newton_pass<T, 0>(0, m, w, kappa, omr, T(0), zeta, floor_x);
  return T(ps.sum_a);
}

// A team's column masses: each worker keeps its own copy of C and log C (one array shared by
// both had the lower range's hardware prefetcher run into the upper range's lines, as in
// Work). After a row both normalised, split at h, worker 0's copy holds keys [0, h) and
// worker 1's [h, l); after a row worker 0 solved alone, worker 0's holds all. Before row l
// (keys [0, l - 1) carry mass, key l - 1 is new: 0 in both copies) each worker takes from
// the other's copy what it is about to read: in a row split at h, worker 0 the keys [h', h)
// that moved to it since the last split h' (h grows with l), worker 1 its range after a row
// solved alone; worker 0 about to solve a row alone, everything since the last split. (The
// other worker wrote those entries before the exchange that preceded this call, and writes
// none of them until after the next one.)
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

// Streaming (non-temporal) stores of the output: they go to memory without first reading the
// lines into the cache. Used where the call's output is larger than a cache keeps (see
// kStreamOutBytes); measured against plain stores (A/B, same call, medians of 31, float64):
// -4 to -5% for one head at n = 2048 and 4096, -2.5% for 8 heads at n = 1024, +1% for one head
// at n = 512 (2 MiB of output, which plain stores leave in the cache for the next reader).
// After the last one, stream_fence() orders them before the stores that publish the result.
// Without 512-bit (or 256-bit) vectors: plain stores.
#if defined(__AVX512F__)
constexpr std::int64_t kStreamBytes = 64;
#elif defined(__AVX__)
constexpr std::int64_t kStreamBytes = 32;
#else
constexpr std::int64_t kStreamBytes = 0;
#endif
constexpr std::int64_t kStreamOutBytes = std::int64_t(16) << 20;

template <typename T>
inline void stream_block(T* dst, const T* src) {  // one vector; dst aligned, src nullptr: zeros
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 8) {
    const double* sp = reinterpret_cast<const double*>(src);
    const __m512d v = sp ? _mm512_loadu_pd(sp) : _mm512_setzero_pd();
    _mm512_stream_pd(reinterpret_cast<double*>(dst), v);
  } else {
    const float* sp = reinterpret_cast<const float*>(src);
    const __m512 v = sp ? _mm512_loadu_ps(sp) : _mm512_setzero_ps();
    _mm512_stream_ps(reinterpret_cast<float*>(dst), v);
  }
#elif defined(__AVX__)
  if constexpr (sizeof(T) == 8) {
    const double* sp = reinterpret_cast<const double*>(src);
    const __m256d v = sp ? _mm256_loadu_pd(sp) : _mm256_setzero_pd();
    _mm256_stream_pd(reinterpret_cast<double*>(dst), v);
  } else {
    const float* sp = reinterpret_cast<const float*>(src);
    const __m256 v = sp ? _mm256_loadu_ps(sp) : _mm256_setzero_ps();
    _mm256_stream_ps(reinterpret_cast<float*>(dst), v);
  }
#else
  (void)dst;
  (void)src;
#endif
}

// dst[0, k) = src[0, k) (src nullptr: zeros), streaming the aligned whole vectors.
template <typename T>
inline void stream_store(T* dst, const T* src, std::int64_t k) {
  std::int64_t j = 0;
  if (kStreamBytes > 0) {
    constexpr std::int64_t L = kStreamBytes > 0 ? kStreamBytes / std::int64_t(sizeof(T)) : 1;
    for (; j < k && reinterpret_cast<std::uintptr_t>(dst + j) % kStreamBytes != 0; ++j)
      dst[j] = src ? src[j] : T(0);
    for (; j + L <= k; j += L) stream_block<T>(dst + j, src ? src + j : nullptr);
  }
  for (; j < k; ++j) dst[j] = src ? src[j] : T(0);
}

// Whether a call writing `bytes` of output streams it: PROOFS_CHECK_STREAM_OUT=0 never, =1
// always (tests compare the two), else from kStreamOutBytes (16 MiB: half this VM's L3; a
// 2048 x 2048 float64 slice is 32 MiB).
inline bool stream_output(std::int64_t bytes) {
  if (kStreamBytes == 0) return false;
  const char* v = std::getenv("PROOFS_CHECK_STREAM_OUT");
  if (v && *v) return *v == '1';
  return bytes >= kStreamOutBytes;
}

inline void stream_fence() {
#if defined(__x86_64__) || defined(__i386__)
  if (kStreamBytes > 0) _mm_sfence();
#endif
}

// A team's split key for a row of l keys: worker 0 takes [0, h), worker 1 [h, l); a multiple
// of 32 keys (whole vectors and cache lines on each side), or l itself.
inline std::int64_t split_key(std::int64_t l) { return std::min(l, ((l + 1) / 2 + 31) / 32 * 32); }

// Asks for the cache lines of [p, p + bytes) to be loaded for reading (a hint: nothing is
// read, and no address faults). Used for the next row's scores (see solve_row).
inline void prefetch_lines(const void* p, std::int64_t bytes) {
  if (bytes <= 0) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (std::uintptr_t b = a & ~std::uintptr_t(63); b < a + std::uintptr_t(bytes); b += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(b), 0, 3);
}

// Solve one row in place: srow (l keys, -inf = masked), col (l masses C[l-1, :], updated to
// C'[l, :]), out (l weights, written). lcol: log of col (maintained here as well).
// w: this worker's work arrays and key lists (a team's: see forward_impl); me: alone
// (me.tm == nullptr) or one of a team of two, which split the keys at h: [0, h) and [h, l).
// stream_out: out written by streaming stores (converged unmasked rows; see stream_store).
// next: the next row's scores (l + 1 keys; nullptr: none), scanned by this row's first pass
// (fused_on) or prefetched once this row's scores are scanned; next2: the row after it
// (nullptr: none), prefetched by the first pass.
template <typename T>
RowStats solve_row(std::int64_t l, const T* srow, T* col, T* lcol, T* out, T kappa, T omr,
                   double tol, std::int64_t max_iter, Work<T>& w, Member& me,
                   bool stream_out = false, const T* next = nullptr,
                   const T* next2 = nullptr) {
  RowStats st;
  // A team splits at about half the row (split_key). Worker 1, with the recent keys, does more
  // per row, and worker 0 waits more at the exchanges (n = 2048, rho = 0.99: 1.9 ms against
  // 0.9 of a 12.8 ms call); a split at 0.55 or 0.6 of the row, or 64 or 128 keys above half,
  // moved the waiting to worker 1 without changing the call's time (A/B 0.997-1.011, AMD
  // EPYC VM, 2026-12-03).
  if (me.tm) {
    const std::int64_t h = split_key(l);
    me.lo = me.t == 0 ? 0 : h;
    me.hi = me.t == 0 ? h : l;
  }
  const std::int64_t lo = me.tm ? me.lo : 0, hi = me.tm ? me.hi : l;
  // row shift (Proposition 2.4): scores relative to the row max, so exp never overflows and
  // a constant shift changes nothing; a difference that overflows is -inf (weight 0).
  const T inf = std::numeric_limits<T>::infinity();
  T smax = -inf, smin = inf;
  int nanc = 0;
  // The row's range and NaN check: read off the previous row's first pass, which scanned this
  // row's scores too (see below; in a team both workers' parts, exchanged with the sums of
  // that row's first evaluation), or scanned here, before the rest.
  const bool fused = fused_on();
  const bool ahead = fused && w.ahead_row == l && (!me.tm || me.last_split_h >= 0);
  w.ahead_row = -1;
  if (ahead) {
    smax = w.ahead_max;
    smin = w.ahead_min;
    nanc = w.ahead_nan > 0 ? 1 : 0;
  } else {
#pragma omp simd reduction(max : smax) reduction(min : smin) reduction(| : nanc)
    for (std::int64_t j = lo; j < hi; ++j) {
      const T v = srow[j];
      nanc |= (v != v) ? 1 : 0;
      smax = v > smax ? v : smax;
      smin = v < smin ? v : smin;
    }
  }
  // The next row's part for this worker, prefetched now: the scan above is the first read of
  // a row, from memory once the scores outgrow the caches, and the solve that follows leaves
  // the memory idle. (Issued here, before the exchange, rather than after it or a row
  // further ahead: the same within the noise.) A/B against no prefetch, AMD EPYC VM,
  // 2026-12-03, interleaved medians of 25 calls (an A/A pair 0.98-1.00 in the same runs):
  // one head, float64, 0.93-0.97 at n = 1024-4096, 1.00 at 512 (its scores stay in cache);
  // float32 at 2048 0.92; 8 heads 0.93 at 512 and 0.94-1.00 at 2048. Where the first pass
  // below runs, it reads the next row's scores itself, and the row after it is prefetched
  // instead (A/B 0.975-0.983 one head n >= 2048 and 8 heads at 1024, within +-2% at 512;
  // Intel VM, 2026-12-04).
  if (next != nullptr && !fused) {
    const std::int64_t nl = l + 1, nh = split_key(nl);
    const std::int64_t plo = me.tm && me.t == 1 ? nh : 0, phi = me.tm && me.t == 0 ? nh : nl;
    prefetch_lines(next + plo, (phi - plo) * std::int64_t(sizeof(T)));
  } else if (next2 != nullptr && fused) {
    const std::int64_t nl = l + 2, nh = split_key(nl);
    const std::int64_t plo = me.tm && me.t == 1 ? nh : 0, phi = me.tm && me.t == 0 ? nh : nl;
    prefetch_lines(next2 + plo, (phi - plo) * std::int64_t(sizeof(T)));
  }
  if (me.tm && !ahead) {
    const double mine[3] = {double(smax), double(smin), double(nanc)};
    double other[3] = {-double(inf), double(inf), 0.0};
    exchange(me, mine, 3, other);
    smax = std::max(smax, T(other[0]));
    smin = std::min(smin, T(other[1]));
    nanc |= other[2] != 0.0 ? 1 : 0;
  }
  const bool nan = nanc != 0;
  if (nan || smax == inf || smax == -inf) {  // the caller raises ValueError
    st.bad = nan ? 1 : (smax == inf ? 2 : 3);
    st.ok = false;
    if (!me.tm || me.t == 0)
      for (std::int64_t j = 0; j < l; ++j) out[j] = 0;
    return st;
  }
  const T cut = -(Lim<T>::under + std::log(T(l)) + T(4)) / omr;  // weight < e^{-under}
  const bool unmasked = smin - smax > cut;  // every key survives
  if (me.tm) {
    const std::int64_t h = me.t == 0 ? me.hi : me.lo, last = me.last_split_h;
    // the columns that change hands (sync_columns) were written by the other worker in the
    // previous row: without this row's scan exchange, an exchange first wherever any do (the
    // split point moved, once in 64 rows; a masked row, which worker 0 solves alone), which
    // both workers see from the same numbers
    if (ahead && (!unmasked || h > last)) {
      const double mine[1] = {0.0};
      double other[1];
      exchange(me, mine, 1, other);
    }
    sync_columns<T>(me, l, h, unmasked);
  }
  std::int64_t m = 0;
  T s_abs = 0;
  RowStart<T> rs;
  if (unmasked && fused) {
    // The first pass over this worker's keys: copies them into w (shifted by the row max),
    // computes q_j = s_j - kappa log C_j and counts the fresh keys; with the previous row's
    // max of q as a guess of this row's (w.e_ref), E_j = e^{q_j - e_ref} and their sum
    // (solve_compact's P; recomputed there where the guess is more than kERefHi below the
    // max or 8 above it: overflow, or keys lost to underflow); and it scans the next row's
    // scores at the same keys (the next row's range and NaN check, above; the worker with
    // the row's last key takes the next row's new one too). One pass where the scan, the
    // copy and the E pass were three, and in a team one exchange a row less.
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
      w.ahead_min = nmin;  // solve_compact exchanges (RowStart::ahead_row)
      w.ahead_nan = nnan;
      if (!me.tm) w.ahead_row = l + 1;
      rs.ahead_row = l + 1;
    }
    const bool e_in_range =
        e_guess && qmax_f > -inf && e_ref >= qmax_f - kERefHi<T> && e_ref <= qmax_f + 8;
    rs.q_ready = true;
    rs.qmax = qmax_f;
    rs.n_fresh = std::int64_t(n_fresh);
    rs.e_ready = e_in_range;
    rs.e_ref = e_ref;
    rs.e_sum = e_sum;
    st.e_kept = e_in_range;
    if (qmax_f > -inf) w.e_ref = qmax_f;
    m = l;
    s_abs = std::max(std::abs(smax), std::abs(smin));
  } else if (unmasked) {  // a contiguous copy, and the start's
    // q_j = s_j - kappa log C_j in the same loop (see solve_compact)
    T qmax_own = -inf;
    T* __restrict ws = w.s.data();
    T* __restrict wc = w.c.data();
    T* __restrict wl = w.lc.data();
    T* __restrict wq = w.q.data();
#pragma omp simd reduction(max : qmax_own)
    for (std::int64_t j = lo; j < hi; ++j) {
      const T sj = srow[j] - smax, cj = col[j], lj = lcol[j];
      const T qj = cj > 0 ? sj - kappa * lj : inf;
      ws[j] = sj;
      wc[j] = cj;
      wl[j] = lj;
      wq[j] = qj;
      qmax_own = std::max(qmax_own, cj > 0 ? qj : -inf);
    }
    rs.q_ready = true;
    rs.qmax = qmax_own;
    m = l;
    s_abs = std::max(std::abs(smax), std::abs(smin));
  } else if (me.tm) {  // masked keys: the compaction is serial, worker 0 solves the row alone
    if (me.t == 1) return st;
    Member alone;
    return solve_row<T>(l, srow, col, lcol, out, kappa, omr, tol, max_iter, w, alone,
                        stream_out);  // (the next row then scans its own scores)
  }
  for (std::int64_t j = 0; m < l && j < l; ++j) {
    const T v = srow[j] - smax;  // -inf for masked keys and overflowing differences
    out[j] = 0;
    if (v > cut) {
      s_abs = std::max(s_abs, std::abs(srow[j]));
      w.idx[m] = j;
      w.s[m] = v;
      w.c[m] = col[j];
      w.lc[m] = lcol[j];
      ++m;
    }
  }
  if (m == 0) return st;  // cannot happen for a validated row (its max key survives)
  const bool all = (m == l);
  const T tot = solve_compact<T>(m, w, me, kappa, omr, tol, max_iter, s_abs, rs, st);
  if (me.tm && st.fallback && me.t == 1) return st;  // worker 0 finished the row alone
  // the keys this worker normalises: its range in a team, all of them alone or after a fallback
  const bool split = me.tm && !st.fallback;
  const std::int64_t nlo = split ? lo : 0, nhi = split ? hi : l;
  if (split) st.split_h = me.t == 0 ? hi : lo;
  const T* __restrict a = w.a.data();
  const T* __restrict ld = w.ld.data();
  const T* __restrict c = w.c.data();
  const T inv = T(1) / tot;
  const T dinv = inv - T(1);
  // normalise; the new column mass C' = C + a/tot = D + a (1/tot - 1) and its log from
  // log D by one log1p step (|a (1/tot - 1) / D| <= |1/tot - 1|, tiny at convergence)
  // (level 3 when |1/tot - 1| <= 2^-12, as at convergence; level 1 up to 1/8; else fresh)
  const T adinv = std::abs(dinv);
  auto new_log = [&](std::int64_t k) {
    const T dk = c[k] + a[k];
    return dk > 0 ? ld[k] + log1p_small<T, 1>(a[k] * dinv / dk) : T(0);
  };
  if (all && adinv <= T(kPolyLimit[3])) {
    T* __restrict o = stream_out ? w.o.data() : out;  // staged, then streamed
#pragma omp simd
    for (std::int64_t j = nlo; j < nhi; ++j) {
      const T aj = a[j] * inv;
      const T dk = c[j] + a[j];
      o[j] = aj;
      col[j] = c[j] + aj;
      lcol[j] = dk > 0 ? ld[j] + log1p_small<T, 3>(a[j] * dinv / dk) : T(0);
    }
    if (stream_out) stream_store<T>(out + nlo, o + nlo, nhi - nlo);
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
  return st;
}

// Rows from this length on may be split between the two workers of a team (below it the
// exchanges cost more than the halved arithmetic saves; measured in benchmarks/). 128 and 192
// were no better on an AMD EPYC VM (2026-12-03; one head, n = 384-1024: A/B 0.95-1.04 in
// float64, 1.02-1.05 in float32, interleaved medians of 41 calls). Where an exchange costs
// more, the team starts later (team_start_row).
constexpr std::int64_t kSplitRow = 256;

// The team's first shared row, from what one exchange costs on this machine now. A shared
// row saves half its per-key work (~5-6 ns a key, float64) and pays its exchanges (5-8 a row)
// and its reads of the other worker's keys, each about one transfer of a cache line between
// the two cores: so the row length from which sharing pays grows with that transfer's
// latency. Measured, one head, A/B in one process against the team from row 256:
// - Intel Xeon VM (2026-12-04), an exchange 150-200 ns: the team from row 1024 took 0.85x the
//   time at n = 512 and 1024, 0.96-0.97x at 2048 (0.89x in float32) and 0.95x at 4096; from
//   512, 768 or 1536 no better than from 1024 (1.00-1.14x its time);
// - AMD EPYC VM (2026-12-03), an exchange ~20 ns when both workers arrive together: the team
//   from row 256 gained 4-10% over one thread at n = 512, 1.4x at 2048.
// Hence the first shared row ~6 times the exchange's cost in ns, rounded (in log scale) to the
// nearest of 256, 384, 512, 768, 1024, 1536, 2048 (the measurement's jitter, a few %, moves
// it only near a boundary): 256 up to ~50 ns, 1024 from ~150 to ~210 ns. Measured at each
// call (the median of three blocks of kCalibExchanges exchanges: a few us, against >= 0.3 ms
// for the call) by worker 0, whose choice both take. PROOFS_CHECK_TEAM_FROM=r fixes it at r
// (tests); PROOFS_CHECK_TEAM_EXCHANGE_NS=x takes x for the measured cost (tests of the rule).
constexpr int kCalibExchanges = 8;
constexpr double kTeamRowsPerNs = 6.0;
inline std::int64_t team_row_for_cost(double ns) {
  constexpr std::int64_t ladder[7] = {256, 384, 512, 768, 1024, 1536, 2048};
  const double want = kTeamRowsPerNs * ns;
  if (!(want > double(ladder[0]))) return ladder[0];  // (NaN too)
  std::int64_t best = ladder[0];
  for (std::int64_t r : ladder)
    if (std::abs(std::log(want / double(r))) < std::abs(std::log(want / double(best)))) best = r;
  return best;
}
inline std::int64_t team_start_row(Member& me, double* measured_ns) {
  double ns = 0;
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
  ns = block[1];
  const char* env_ns = std::getenv("PROOFS_CHECK_TEAM_EXCHANGE_NS");
  if (env_ns && *env_ns) ns = std::atof(env_ns);
  std::int64_t row = team_row_for_cost(ns);
  const char* env_from = std::getenv("PROOFS_CHECK_TEAM_FROM");
  if (env_from && *env_from) row = std::max<std::int64_t>(kSplitRow, std::atol(env_from));
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
// The team's check: every kTeamCheck shared rows; it dissolves when the two workers together
// waited more than kTeamGiveUp of the window (1 would be break-even if waiting were the only
// loss; a shared row's work is also slower than alone, so less: 0.7). Measured on an AMD EPYC
// (Zen 5) VM at n = 2048, rho = 0.9: a healthy team waits 0.29-0.37 of the window at rows
// >= 1024 in float32 (0.16-0.23 in float64) and still solves the call 1.31x faster than
// worker 0 alone from row 320 on (whole call 5.77 against 7.56 ms; by the 2T - W_0 - W_1
// estimate, 1.65x). At 0.5, as before, a noisy minute on that VM dissolved float32 teams at
// row ~1090 (10.7 ms against 9.0 for a team that stayed).
// Rows shorter than kTeamLongRow only dissolve it at kTeamGiveUpShort: there the exchanges
// cost about what the halved arithmetic saves, so a healthy team waits a third to a half of
// the window (measured at n = 4096, rows 320 and 384: 0.32 and 0.56), and 0.5 dissolved it
// there, for good, before the long rows where it pays (1.5x and more); an oversubscribed
// machine, where each worker waits while the other is descheduled, shows about 1. And it
// takes two such windows in a row: this VM's cores are time-shared, and one window in a few
// dozen held a pause of one worker of several ms (measured at n = 4096: 4.5 ms of waiting in
// a 5.1 ms window, the next 0.3 ms in 0.9), which dissolved the team for the rest of the call.
// PROOFS_CHECK_TEAM_GIVE_UP overrides both (tests: < 0 dissolves at the first check).
constexpr std::int64_t kTeamCheck = 64;
constexpr std::int64_t kTeamLongRow = 1024;
constexpr double kTeamGiveUp = 0.7;
constexpr double kTeamGiveUpShort = 0.85;
inline bool team_give_up_forced() {
  const char* v = std::getenv("PROOFS_CHECK_TEAM_GIVE_UP");
  return v && *v && std::atof(v) < 0;
}
inline double team_give_up(std::int64_t l) {
  const char* v = std::getenv("PROOFS_CHECK_TEAM_GIVE_UP");
  if (v && *v) return std::atof(v);
  return l < kTeamLongRow ? kTeamGiveUpShort : kTeamGiveUp;
}

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

// Rows [0, n) of one (batch, head) slice: solve, zero the upper triangle (out is not
// zero-initialised: one pass over n^2 less), and gather the slice's statistics into slice_stats
// (kStatCols values). Alone (me.tm == nullptr) every row; in a team, rows of length >= from =
// me.team_from (at most n: at least the last row is shared) are shared and the shorter ones
// are worker 0's; only worker 0 writes the statistics.
// The team's zeros: while worker 0 solves the short rows alone, worker 1 (idle until the
// first shared row) zeroes whole rows' upper triangles from the top, until worker 0 reaches
// the hand-over exchange before row `from`; there they agree on `filled` (rows [0, filled)
// done) and whether worker 0 stopped at an invalid row. The short rows left over, and the
// shared rows' zeros, are halved between the workers. (At n = 512 the short rows' zeros were
// about 6% of one worker's time; a worker 0 stopping at an invalid short row, with no
// hand-over, left worker 1 waiting at its first shared row until the 60 s lost-step error.)
template <typename T>
void solve_slice(std::int64_t n, const T* sb, T* ob, T* col, T* lcol, T kappa, T omr, double tol,
                 std::int64_t max_iter, Work<T>& w, Member& me, double* slice_stats, bool stream_out) {
  struct FenceOnExit {  // whichever way this worker leaves (worker 1 has several exits)
    bool on;
    ~FenceOnExit() {
      if (on) stream_fence();
    }
  } fence{stream_out};
  const bool lead = me.tm == nullptr || me.t == 0;
  w.e_ref = std::numeric_limits<T>::quiet_NaN();  // (a slice's rows never guess from another's)
  w.ahead_row = -1;
  const std::int64_t from = me.tm ? std::min(std::max(me.team_from, kSplitRow), n) : kSplitRow;
  double mi = 0, mr = 0, ok = 1, fb = 0, bad = 0, shared_rows = 0, series_rows = 0, e_rows = 0;
  Member alone;
  bool team = me.tm != nullptr;
  auto window_start = std::chrono::steady_clock::now();
  double waited_before = 0.0;
  std::int64_t filled = 0;  // rows [0, filled) have their upper triangle zeroed
  int slow_windows = 0;     // the team's checks that found it waiting too long, in a row
  // the hand-over exchange before the first shared row (both workers; see above)
  auto hand_over = [&](bool stopped) {
    if (!lead) {
      // (PROOFS_CHECK_TEAM_ZERO_AHEAD=k caps this at k rows: tests of the rows left over)
      const char* cap_env = std::getenv("PROOFS_CHECK_TEAM_ZERO_AHEAD");
      const std::int64_t cap =
          cap_env && *cap_env ? std::min<std::int64_t>(std::atol(cap_env), n - 1) : n - 1;
      while (filled < cap && !other_arrived(me)) zero_upper(ob, n, filled++, 2, stream_out);
    }
    const double mine[2] = {stopped ? 1.0 : 0.0, double(filled)};
    double other[2] = {0.0, 0.0};
    exchange(me, mine, 2, other);
    const bool stop = lead ? stopped : other[0] > 0;
    filled = lead ? std::int64_t(other[1]) : filled;
    if (!stop) {
      for (std::int64_t r = filled; r < from - 1; ++r)
        zero_upper(ob, n, r, me.t, stream_out);
    }
    return stop;
  };
  if (team && !lead) {  // worker 1: zeroes, then joins at the first shared row
    if (hand_over(false)) return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t l = i + 1;
    if (team && lead && l == from) hand_over(false);
    // Every kTeamCheck shared rows the team checks that it pays: the two workers' waiting
    // over the window against its length (team time T, useful work T - W_t each, so alone
    // would take about 2T - W_0 - W_1; on a machine whose cores are time-shared the waits
    // grow and the team loses). Both decide from the same exchanged numbers.
    if (team && l >= from && (l - from) % kTeamCheck == 0 && l > from) {
      const auto now = std::chrono::steady_clock::now();
      const double mine[2] = {me.waited - waited_before,
                              std::chrono::duration<double>(now - window_start).count()};
      double other[2] = {0.0, 0.0};
      exchange(me, mine, 2, other);
      const bool slow = mine[0] + other[0] > team_give_up(l) * std::max(mine[1], other[1]);
      slow_windows = slow ? slow_windows + 1 : 0;
      if (slow_windows >= (team_give_up_forced() ? 1 : 2)) {
        team = false;  // dissolve: worker 0 solves the remaining rows alone
        if (!lead) return;
        if (me.last_split_h >= 0) take_columns<T>(me, me.last_split_h, l - 1);
      }
      window_start = std::chrono::steady_clock::now();
      waited_before = me.waited;
    }
    const bool shared = team && l >= from;
    if (!shared && !lead) continue;  // worker 1 waits for the next shared row's exchange
    RowStats st = solve_row<T>(l, sb + i * n, col, lcol, ob + i * n, kappa, omr, tol, max_iter,
                               w, shared ? me : alone, stream_out,
                               i + 1 < n ? sb + (i + 1) * n : nullptr,
                               i + 2 < n ? sb + (i + 2) * n : nullptr);
    // the upper triangle: halved between the workers of a shared row (one worker filling it
    // all left the other waiting at the exchanges), else by whoever solved the row; a team's
    // short rows at the hand-over (above)
    const bool team_short = me.tm != nullptr && l < from;
    if (i >= filled && !team_short) zero_upper(ob, n, i, shared ? me.t : 2, stream_out);
    if (st.bad) {  // both workers see it (from the exchanged row scan) and stop
      bad = st.bad;
      if (team && team_short) {  // worker 1 is still zeroing or at the hand-over: stop it
        hand_over(true);
        for (std::int64_t r = filled; r <= i; ++r) zero_upper(ob, n, r, 2, stream_out);
      }
      if (lead) std::fill(ob + (i + 1) * n, ob + n * n, T(0));
      break;
    }
    if (shared && l == from) {  // the first window starts after the first shared row:
      // worker 1 waited there for worker 0's unshared rows, which is not the team's cost
      // (counted, it dissolved almost every team at the first check)
      window_start = std::chrono::steady_clock::now();
      waited_before = me.waited;
    }
    if (shared) me.last_split_h = st.split_h;
    shared_rows += shared ? 1 : 0;
    mi = std::max(mi, double(st.iters));
    mr = std::max(mr, st.resid);
    ok = (ok > 0 && st.ok) ? 1 : 0;
    fb += st.fallback ? 1 : 0;
    series_rows += st.series ? 1 : 0;
    e_rows += st.e_kept ? 1 : 0;
  }
  if (lead) {
    slice_stats[0] = mi;
    slice_stats[1] = mr;
    slice_stats[2] = ok;
    slice_stats[3] = fb;
    slice_stats[4] = bad;
    slice_stats[5] = shared_rows;
    slice_stats[6] = series_rows;
    slice_stats[7] = me.tm ? double(from) : 0.0;
    slice_stats[8] = me.tm ? me.exchange_ns : 0.0;
    slice_stats[9] = e_rows;
  }
}

// CPUs this thread may run on (Linux: its affinity mask; elsewhere not known: 2). A team on
// one CPU, as in a process confined to one core with two torch threads, only takes turns:
// one head at n = 512, rho = 0.99, under `taskset -c 0` took 27-29 ms a call in a team until
// it dissolved (128 rows; 1.56-1.58 s with the former 2^16 spins before a yield), and
// 1.7-2.9 ms alone, with the softmax at 1.4-3.0 ms (AMD EPYC VM, 2026-12-03).
inline int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
  return 2;
}

// The forward's statistics, a row per slice (forward_impl).
constexpr std::int64_t kStatCols = 10;

template <typename T>
void forward_impl(const torch::Tensor& s, torch::Tensor& out, torch::Tensor& stats, double rho,
                  double tol, std::int64_t max_iter) {
  const std::int64_t B = s.size(0), n = s.size(1);
  const T* sp = s.data_ptr<T>();
  T* op = out.data_ptr<T>();
  // (B, kStatCols): max iters, max resid, all ok, fallbacks, first invalid-row code, rows the
  // team of two solved together (0 unless one slice on two threads; see solve_slice), rows
  // solved by the series solve (solve_compact), the team's first shared row and the cost of
  // an exchange in ns it was chosen from (team_start_row; both 0 without a team), rows whose
  // E_j came from solve_row's fused first pass (its guess of the max of q in range)
  double* stp = stats.data_ptr<double>();
  const T kappa = T(rho / (1.0 - rho));
  const T omr = T(1.0 - rho);
  const bool so = stream_output(B * n * n * std::int64_t(sizeof(T)));
  read_series_env();
  if (B == 1 && n >= kSplitRow && at::get_num_threads() >= 2 && !at::in_parallel_region() &&
      usable_cpus() >= 2) {
    // one slice and two threads: a team of two on its rows (a slice per thread would leave
    // one idle). If only one thread shows up (a busy pool), worker 0 goes alone.
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
      if (b1 - b0 == 2) {  // one thread was given both halves: alone
        solve_slice<T>(n, sp, op, col.data(), lcol.data(), kappa, omr, tol, max_iter, w0, me,
                       stp, so);
        return;
      }
      me.t = int(b0);
      int expect = 0;
      if (me.t == 1) {
        if (!team.state.compare_exchange_strong(expect, 1)) return;  // worker 0 went alone
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        std::int64_t spins = 0;
        while (team.state.load(std::memory_order_acquire) == 0 &&
               std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20)) {
          cpu_relax();  // (yielding, as at the exchanges: worker 1 may need this core)
          if (++spins >= kSpinsBeforeYield) std::this_thread::yield();
        }
        if (team.state.compare_exchange_strong(expect, 2)) {  // nobody came: alone
          solve_slice<T>(n, sp, op, col.data(), lcol.data(), kappa, omr, tol, max_iter, w0, me,
                         stp, so);
          return;
        }
      }
      me.tm = &team;
      me.team_from = team_start_row(me, &me.exchange_ns);
      // Each worker's keys in its own Work, the other's read only where a merged list names
      // them. (One Work shared by both, each writing its range of the same arrays, was 12-22%
      // slower on an Intel Xeon VM, same results bit for bit: the lower range's hardware
      // prefetcher runs past its end into the upper range's lines, which the upper worker
      // then has to take back before every write; measured there, worker 1's copy loop took
      // 2.4x and its Newton passes 1.6x worker 0's time for as many keys.)
      Work<T>& own = me.t == 0 ? w0 : w1;
      solve_slice<T>(n, sp, op, static_cast<T*>(team.col[me.t]), static_cast<T*>(team.lcol[me.t]),
                     kappa, omr, tol, max_iter, own, me, stp, so);
    });
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
      solve_slice<T>(n, sp + b * n * n, op + b * n * n, col.data(), lcol.data(), kappa, omr, tol,
                     max_iter, w, alone, stp + kStatCols * b, so);
    }
  });
}

// Forward: s (B, n, n) contiguous float32/float64 (entries above the diagonal ignored, -inf
// masked). Returns (weights (B, n, n), stats (B, kStatCols) float64, see forward_impl).
std::vector<torch::Tensor> forward(torch::Tensor s, double rho, double tol, std::int64_t max_iter) {
  TORCH_CHECK(s.dim() == 3 && s.size(1) == s.size(2), "scores must be (B, n, n)");
  TORCH_CHECK(s.device().is_cpu(), "CPU tensors only");
  s = s.contiguous();
  auto out = torch::empty_like(s);  // every entry written by forward_impl
  // (PROOFS_CHECK_POISON_OUT=1: NaN first, so that a test sees any entry left unwritten)
  const char* poison = std::getenv("PROOFS_CHECK_POISON_OUT");
  if (poison && *poison == '1') out.fill_(std::numeric_limits<double>::quiet_NaN());
  auto stats = torch::zeros({s.size(0), kStatCols}, s.options().dtype(torch::kFloat64));
  if (s.scalar_type() == torch::kFloat64) {
    forward_impl<double>(s, out, stats, rho, tol, max_iter);
  } else {
    TORCH_CHECK(s.scalar_type() == torch::kFloat32, "float32 or float64 only");
    forward_impl<float>(s, out, stats, rho, tol, max_iter);
  }
  return {out, stats};
}

// One streaming row: srow (l), col and lcol (>= l, updated in place), returns (row, stats(4)).
std::vector<torch::Tensor> stream_row(torch::Tensor srow, torch::Tensor col, torch::Tensor lcol,
                                      double rho, double tol, std::int64_t max_iter) {
  TORCH_CHECK(srow.dim() == 1 && col.is_contiguous() && lcol.is_contiguous(), "bad buffers");
  srow = srow.contiguous();
  const std::int64_t l = srow.size(0);
  TORCH_CHECK(col.size(0) >= l && lcol.size(0) >= l, "column buffers too short");
  auto out = torch::empty_like(srow);
  auto stats = torch::zeros({5}, srow.options().dtype(torch::kFloat64));
  double* stp = stats.data_ptr<double>();
  const double kappa = rho / (1.0 - rho), omr = 1.0 - rho;
  read_series_env();
  RowStats st;
  if (srow.scalar_type() == torch::kFloat64) {
    thread_local Work<double> w;
    if (std::int64_t(w.s.size()) < l) w.resize(std::max<std::int64_t>(l, 2 * w.s.size()));
    Member alone;
    w.e_ref = std::numeric_limits<double>::quiet_NaN();  // (no guess from another call's row)
    w.ahead_row = -1;
    st = solve_row<double>(l, srow.data_ptr<double>(), col.data_ptr<double>(),
                           lcol.data_ptr<double>(), out.data_ptr<double>(), kappa, omr, tol,
                           max_iter, w, alone);
  } else {
    thread_local Work<float> w;
    if (std::int64_t(w.s.size()) < l) w.resize(std::max<std::int64_t>(l, 2 * w.s.size()));
    Member alone;
    w.e_ref = std::numeric_limits<float>::quiet_NaN();
    w.ahead_row = -1;
    st = solve_row<float>(l, srow.data_ptr<float>(), col.data_ptr<float>(),
                          lcol.data_ptr<float>(), out.data_ptr<float>(), float(kappa),
                          float(omr), tol, max_iter, w, alone);
  }
  stp[0] = st.iters;
  stp[1] = st.resid;
  stp[2] = st.ok ? 1 : 0;
  stp[3] = st.fallback ? 1 : 0;
  stp[4] = st.bad;
  return {out, stats};
}

// Backward (reverse row sweep). a: weights (B, n, n); gout: dL/da. For row l, with
// D_j = C'[l, j], p_j = a_j / g_j, g_j = 1 + kappa a_j / D_j, abar_j = gout_j + G_j (G: the
// gradient on C[l-1, j] carried from later rows),
//     sbar_j = p_j abar_j - p_j (sum_k p_k abar_k) / sum_k p_k,
//     G_j <- G_j - kappa sbar_j / D_j   (for rows < l).
// The column sums C'[l, :] of one slice are accumulated here first, rows in order, into a
// per-thread buffer (torch.cumsum over rows took 3x this whole kernel: a strided pass).
template <typename T>
void backward_impl(const torch::Tensor& a, const torch::Tensor& gout, torch::Tensor& gs,
                   double rho) {
  const std::int64_t B = a.size(0), n = a.size(1);
  const T* ap = a.data_ptr<T>();
  const T* gp = gout.data_ptr<T>();
  T* sp = gs.data_ptr<T>();
  const T kappa = T(rho / (1.0 - rho));
  at::parallel_for(0, B, 1, [&](std::int64_t b0, std::int64_t b1) {
    std::vector<T> G(n), p(n), cpb(std::size_t(n) * std::size_t(n));
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* ab = ap + b * n * n;
      const T* gb = gp + b * n * n;
      T* sb = sp + b * n * n;
      T* cb = cpb.data();
      for (std::int64_t i = 0; i < n; ++i) {  // C'[i, j] = C'[i-1, j] + a[i, j], j <= i
        const T* ar = ab + i * n;
        T* cr = cb + i * n;
        const T* cprev = i > 0 ? cr - n : cr;
        if (i > 0) {
#pragma omp simd
          for (std::int64_t j = 0; j < i; ++j) cr[j] = cprev[j] + ar[j];
        }
        cr[i] = ar[i];
        std::fill(sb + i * n + i + 1, sb + (i + 1) * n, T(0));  // gs is not zero-initialised
      }
      std::fill(G.begin(), G.end(), T(0));
      for (std::int64_t i = n - 1; i >= 0; --i) {
        const T* ar = ab + i * n;
        const T* cp = cb + i * n;  // C'[l, j] (cumulative column sums, above)
        const T* gr = gb + i * n;
        T* sr = sb + i * n;
        const std::int64_t m = i + 1;
        T sum_v = 0, sum_p = 0;
#pragma omp simd reduction(+ : sum_v, sum_p)
        for (std::int64_t j = 0; j < m; ++j) {
          const T aj = ar[j];
          const T d = cp[j];
          const T pj = aj > 0 ? aj / (T(1) + kappa * aj / d) : T(0);
          p[j] = pj;
          const T v = pj * (gr[j] + G[j]);
          sr[j] = v;
          sum_v += v;
          sum_p += pj;
        }
        const T mean = sum_v / sum_p;
#pragma omp simd
        for (std::int64_t j = 0; j < m; ++j) {
          const T sbar = sr[j] - p[j] * mean;
          sr[j] = sbar;
          const T d = cp[j];
          G[j] -= ar[j] > 0 ? kappa * sbar / d : T(0);
        }
      }
    }
  });
}

torch::Tensor backward(torch::Tensor a, torch::Tensor gout, double rho) {
  TORCH_CHECK(a.dim() == 3 && a.size(1) == a.size(2) && a.sizes() == gout.sizes(),
              "weights and grad must be (B, n, n)");
  a = a.contiguous();
  gout = gout.contiguous().to(a.scalar_type());
  auto gs = torch::empty_like(a);  // every entry written by backward_impl
  if (a.scalar_type() == torch::kFloat64) {
    backward_impl<double>(a, gout, gs, rho);
  } else {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32, "float32 or float64 only");
    backward_impl<float>(a, gout, gs, rho);
  }
  return gs;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "causal OT forward (row Newton), CPU");
  m.def("stream_row", &stream_row, "one streaming row, CPU");
  m.def("backward", &backward, "causal OT backward (reverse row sweep), CPU");
}
