// The exact backward of the operator: the rows' optimality conditions differentiated and the
// rows swept in reverse (derivation: _newton.py, reverse_sweep_backward, the same formula).
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace causal_ot {

// The backward (reverse row sweep) of B slices: ap the weights (B, n, n), gp = dL/da, into
// sp = dL/ds (every entry written). For row l, with
// D_j = C'[l, j], p_j = a_j / g_j, g_j = 1 + kappa a_j / D_j, abar_j = gout_j + G_j (G: the
// gradient on C[l-1, j] carried from later rows),
//     sbar_j = p_j abar_j - p_j (sum_k p_k abar_k) / sum_k p_k,
//     G_j <- G_j - kappa sbar_j / D_j   (for rows < l).
// The column sums C'[l, :] of one slice are accumulated here first, rows in order, into a
// per-thread buffer (a cumsum over rows would be a strided pass).
template <typename T>
void backward_slices(std::int64_t B, std::int64_t n, const T* ap, const T* gp, T* sp,
                     double rho) {
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

}  // namespace causal_ot
