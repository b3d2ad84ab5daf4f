// A row's work buffers and statistics, and the index gather the passes share.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace causal_ot {

// What the solve of one row did.
struct RowStats {
  int iters = 0;       // Newton iterations used (joint + safeguarded)
  double resid = 0.0;  // estimate of the final error of x and zeta (newton_error_bound)
  bool ok = true;      // reached tol
  bool fallback = false;  // finished by the safeguarded nested iteration (solve_safe)
  int bad = 0;         // invalid row: 1 NaN score, 2 +inf score, 3 every key masked
  std::int64_t split_h = -1;  // a team's row normalised by both: its split key (-1: by one)
  bool series = false;  // solved by the series solve (series.h)
  bool e_kept = false;  // the first pass kept its E_j (its guess e_ref in range; row_driver.h)
};

// The most near keys a row solves in its start (row_start.h); beyond, the row starts from the
// closed form alone.
constexpr std::int64_t kMaxNear = 128;
// The near-key loops run on a multiple of kNearPad lanes (one 512-bit vector: 8 doubles, 16
// floats), the extra lanes holding exact no-op keys (score -1e30, C = 1: root at the bound,
// weight 0), so that a handful of near keys still takes the vector path rather than the
// scalar remainder loop.
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
// 64-byte-aligned block at staggered offsets: array k starts k * 192 bytes further into the
// 4 KiB set-index range of the L1 cache than it would at equal sizes, so that key j of every
// array does not fall into the same L1 set (as separately allocated arrays of 512 or 2048
// doubles would, all starting at the same offset modulo 4 KiB).
template <typename T>
struct Work {
  std::vector<T> block;
  Arr<T> s, c, lc, q, x, r, gi, a, ld, o;
  std::vector<T> ns, nc, nlc, nx, nr, ngi, na, nld;  // the near keys' (row_start.h)
  std::vector<T> keep;  // the near solve's state, kept while the series solve runs
  std::vector<std::int64_t> idx, fresh, near, exc, fresh_m, near_m, nearb, nearb_m, near_all;
  // the previous row's max of q (the first pass takes it as its guess of this row's, for
  // E_j = e^{q_j - e_ref}); NaN: none (a slice's or a stream call's first row)
  T e_ref = std::numeric_limits<T>::quiet_NaN();
  // the next row's score range and NaN flag (> 0), scanned by this row's first pass, valid
  // for row ahead_row only (-1: none)
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
    for (std::vector<T>* v : {&ns, &nc, &nlc, &nx, &nr, &ngi, &na, &nld})
      v->resize(kMaxNear + kNearPad<T>);
    for (std::vector<std::int64_t>* v : {&idx, &fresh, &near, &exc, &fresh_m, &near_m, &nearb,
                                         &nearb_m})
      v->resize(m);
    near_all.resize(kMaxNear);
    keep.resize(5 * kMaxNear);
  }
};

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

}  // namespace causal_ot
