// Transcendentals of the causal OT kernel, one template over the float type T (float, double).
//
// exp and log are written here so that the compiler can vectorise the key loops (-O3
// -march=native): a range reduction plus a polynomial, relative error ~2 ulp in float64 and
// float32 (tested against torch.exp / torch.log). After a row's first Newton step most passes
// need neither: a_j and log D_j are updated along small steps by the expm1/log1p Taylor
// polynomials below, of the degree the pass's largest step needs (kPolyLimit).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace causal_ot {

// The constants of T's exp and log: range reduction, polynomial degrees, bit layout.
template <typename T>
struct FloatTraits;

template <>
struct FloatTraits<double> {
  using Bits = std::uint64_t;
  static constexpr int kMantissa = 52, kBias = 1023;
  static constexpr Bits kMantissaMask = 0x000FFFFFFFFFFFFFULL, kOneBits = 0x3FF0000000000000ULL;
  static constexpr Bits kTwoPowMantissaBits = 0x4330000000000000ULL;  // 2^52
  static constexpr double kTwoPowMantissa = 4503599627370496.0;
  static constexpr double kExpLo = -708.3, kExpHi = 709.7;  // the normal range of e^x
  static constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52: x + it rounds to an int
  static constexpr double kLog2e = 1.4426950408889634;
  // log 2 = kLn2Hi + kLn2Lo, kLn2Hi with trailing zero bits (k * kLn2Hi exact)
  static constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  static constexpr double kSqrt2 = 1.4142135623730951;
  static constexpr int kExpDegree = 12;  // Taylor of e^r, |r| <= 0.347: truncation < 2e-16
  static constexpr int kLogDegree = 11;  // 2 atanh(f) = 2 f sum_{k<=11} f^{2k}/(2k+1), |f| <= 0.1716
};

template <>
struct FloatTraits<float> {
  using Bits = std::uint32_t;
  static constexpr int kMantissa = 23, kBias = 127;
  static constexpr Bits kMantissaMask = 0x007FFFFFU, kOneBits = 0x3F800000U;
  static constexpr Bits kTwoPowMantissaBits = 0x4B000000U;  // 2^23
  static constexpr float kTwoPowMantissa = 8388608.0f;
  static constexpr float kExpLo = -87.3f, kExpHi = 88.7f;
  static constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  static constexpr float kLog2e = 1.44269504f;
  static constexpr float kLn2Hi = 0.693145752f, kLn2Lo = 1.42860677e-06f;
  static constexpr float kSqrt2 = 1.41421356f;
  static constexpr int kExpDegree = 7;
  static constexpr int kLogDegree = 4;
};

template <typename T>
inline typename FloatTraits<T>::Bits to_bits(T x) {
  typename FloatTraits<T>::Bits u;
  std::memcpy(&u, &x, sizeof(T));
  return u;
}
template <typename T>
inline T from_bits(typename FloatTraits<T>::Bits u) {
  T x;
  std::memcpy(&x, &u, sizeof(T));
  return x;
}

template <typename T>
struct Lim {
  static constexpr T tiny = std::numeric_limits<T>::min();
  static constexpr T eps = std::numeric_limits<T>::epsilon();
  // a key whose weight is below e^{-under} is flushed to exactly 0 (below the normal range)
  static constexpr T under = std::is_same<T, double>::value ? T(708) : T(87);
};

constexpr double factorial(int k) { return k <= 1 ? 1.0 : k * factorial(k - 1); }

// The polynomials' coefficients in T, each one correctly rounded division: exp[k] = 1/k! (the
// Taylor series of e^r), log[k] = 1/(2k+1) (atanh(f)/f as a series in f^2).
template <typename T>
struct ExpLogCoef {
  T exp[FloatTraits<T>::kExpDegree + 1] = {};
  T log[FloatTraits<T>::kLogDegree + 1] = {};
  constexpr ExpLogCoef() {
    for (int k = 0; k <= FloatTraits<T>::kExpDegree; ++k) exp[k] = T(1) / T(factorial(k));
    for (int k = 0; k <= FloatTraits<T>::kLogDegree; ++k) log[k] = T(1) / T(2 * k + 1);
  }
};

// exp's range reduction: x (clamped to the normal range) = k log 2 + r, |r| <= 0.347; t holds
// k in its low mantissa bits (for exp_scale).
template <typename T>
__attribute__((always_inline)) inline T exp_reduce(T x, T& t) {
  using F = FloatTraits<T>;
  const T xc = x < F::kExpLo ? F::kExpLo : (x > F::kExpHi ? F::kExpHi : x);
  t = xc * F::kLog2e + F::kShifter;
  const T k = t - F::kShifter;
  const T r = xc - k * F::kLn2Hi;
  return r - k * F::kLn2Lo;
}
// e^r 2^k from the polynomial p = e^r; 0 below the normal range
template <typename T>
__attribute__((always_inline)) inline T exp_scale(T x, T t, T p) {
  using F = FloatTraits<T>;
  using B = typename F::Bits;
  const B kb = to_bits(t) - to_bits(F::kShifter);  // k as a two's-complement integer
  const T scale = from_bits<T>((kb + B(F::kBias)) << F::kMantissa);
  return x < F::kExpLo ? T(0) : p * scale;
}

// exp(x); 0 below the normal range (x < log(min normal)), never +inf (clamped).
template <typename T>
__attribute__((always_inline)) inline T fexp(T x) {
  constexpr int deg = FloatTraits<T>::kExpDegree;
  constexpr ExpLogCoef<T> c{};
  T t;
  const T r = exp_reduce(x, t);
  T p = c.exp[deg];
#pragma GCC unroll 16
  for (int k = deg - 1; k >= 0; --k) p = p * r + c.exp[k];
  return exp_scale(x, t, p);
}

// log's range reduction: x = m 2^e with m in [sqrt(1/2), sqrt(2)); returns f = (m-1)/(m+1)
// (log m = 2 atanh f, |f| <= 0.1716) and e.
template <typename T>
__attribute__((always_inline)) inline T log_reduce(T x, T& e) {
  using F = FloatTraits<T>;
  const typename F::Bits u = to_bits(x);
  const typename F::Bits eb = u >> F::kMantissa;  // biased exponent (x > 0)
  T m = from_bits<T>((u & F::kMantissaMask) | F::kOneBits);
  e = from_bits<T>(eb | F::kTwoPowMantissaBits) - F::kTwoPowMantissa - T(F::kBias);
  const bool big = m > F::kSqrt2;
  m = big ? T(0.5) * m : m;
  e = big ? e + T(1) : e;
  return (m - T(1)) / (m + T(1));
}
// e log 2 + 2 f p, log 2 in two parts
template <typename T>
__attribute__((always_inline)) inline T log_finish(T e, T f, T p) {
  using F = FloatTraits<T>;
  return e * F::kLn2Hi + (e * F::kLn2Lo + T(2) * f * p);
}

// log(x) for x >= min normal (callers clamp): e log 2 + 2 atanh((m-1)/(m+1)).
template <typename T>
__attribute__((always_inline)) inline T flog(T x) {
  constexpr int deg = FloatTraits<T>::kLogDegree;
  constexpr ExpLogCoef<T> c{};
  T e;
  const T f = log_reduce(x, e);
  const T s = f * f;
  T p = c.log[deg];
#pragma GCC unroll 16
  for (int k = deg - 1; k >= 0; --k) p = p * s + c.log[k];
  return log_finish(e, f, p);
}

// The same exp and log with the float64 polynomials by Estrin's scheme (products of r^2, r^4,
// r^8 instead of one chain of fused multiply-adds): a few more operations, about half the
// latency. For short loops whose every step waits on the last one (the near keys' Newton
// loop); float32 keeps its short Horner forms.
template <typename T>
__attribute__((always_inline)) inline T fexp_lat(T x) {
  if constexpr (std::is_same<T, double>::value) {
    double t;
    const double r = exp_reduce(x, t);
    const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const double a0 = 1.0 + r, a1 = 0.5 + r * (1.0 / 6.0), a2 = 1.0 / 24.0 + r * (1.0 / 120.0);
    const double a3 = 1.0 / 720.0 + r * (1.0 / 5040.0);
    const double a4 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
    const double a5 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0), a6 = 1.0 / 479001600.0;
    const double b0 = a0 + a1 * r2, b1 = a2 + a3 * r2, b2 = a4 + a5 * r2;
    const double d0 = b0 + b1 * r4, d1 = b2 + a6 * r4;
    return exp_scale(x, t, d0 + d1 * r8);
  } else {
    return fexp(x);
  }
}

template <typename T>
__attribute__((always_inline)) inline T flog_lat(T x) {
  if constexpr (std::is_same<T, double>::value) {
    double e;
    const double f = log_reduce(x, e);
    const double s = f * f;
    const double s2 = s * s, s4 = s2 * s2, s8 = s4 * s4;
    const double a0 = 1.0 + s * (1.0 / 3.0), a1 = 1.0 / 5.0 + s * (1.0 / 7.0);
    const double a2 = 1.0 / 9.0 + s * (1.0 / 11.0), a3 = 1.0 / 13.0 + s * (1.0 / 15.0);
    const double a4 = 1.0 / 17.0 + s * (1.0 / 19.0), a5 = 1.0 / 21.0 + s * (1.0 / 23.0);
    const double b0 = a0 + a1 * s2, b1 = a2 + a3 * s2, b2 = a4 + a5 * s2;
    return log_finish(e, f, (b0 + b1 * s4) + b2 * s8);
  } else {
    return flog(x);
  }
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

}  // namespace causal_ot
