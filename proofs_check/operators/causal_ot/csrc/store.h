// Output stores: streaming (non-temporal) stores for outputs larger than a cache keeps, and
// the prefetch of the next row's scores.
//
// Streaming stores go to memory without first reading the lines into the cache; after the
// last one, stream_fence() orders them before the stores that publish the result. Without
// 512-bit (or 256-bit) vectors: plain stores.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <cstdint>

#include "options.h"

namespace causal_ot {

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

// Outputs from this size on are streamed (about half a large L3 cache; a 2048 x 2048 float64
// slice is 32 MiB), unless options.stream_stores says always (1) or never (0).
inline bool stream_output(const KernelOptions& opt, std::int64_t bytes) {
  if (kStreamBytes == 0) return false;
  if (opt.stream_stores >= 0) return opt.stream_stores == 1;
  return bytes >= kStreamOutBytes;
}

inline void stream_fence() {
#if defined(__x86_64__) || defined(__i386__)
  if (kStreamBytes > 0) _mm_sfence();
#endif
}

// Asks for the cache lines of [p, p + bytes) to be loaded for reading (a hint: nothing is
// read, and no address faults). Used for the next row's scores (see solve_row).
inline void prefetch_lines(const void* p, std::int64_t bytes) {
  if (bytes <= 0) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (std::uintptr_t b = a & ~std::uintptr_t(63); b < a + std::uintptr_t(bytes); b += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(b), 0, 3);
}

}  // namespace causal_ot
