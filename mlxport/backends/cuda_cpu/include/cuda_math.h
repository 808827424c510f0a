// The CUDA math API for device code (C++20, clang): the single and double precision functions,
// their C++ overloads, the intrinsics (fast math, explicit rounding modes, conversions, type
// punning, integer bit tricks) and the C constants kernels use without an include.
//
// No C library header is included: <math.h> and <cmath> are replaced by this directory's own
// (they include this file), since the C library's declarations of sqrtf & co. would clash with
// these definitions. Functions call compiler builtins, which may become calls into libm.
//
// Accuracy: the float functions are the C library's (glibc: within 1-2 ulp) or computed in
// double and rounded once; CUDA promises at most 2-4 ulp for most of them, so a port that agrees
// with these within CUDA's bounds is right. The fast-math intrinsics (__expf, __sinf, ...)
// compute the precise function: their GPU results are approximations that differ per
// architecture. The intrinsics with an explicit rounding mode (__fadd_rz, __float2int_rd,
// __ll2float_ru, __double2float_rd, ...) round exactly as named, except __fma_rz/ru/rd on
// doubles, which round to nearest.
//
// Float-to-integer conversions saturate and send NaN to 0, as the GPU's cvt does; to a 64-bit
// integer NaN becomes 0x8000000000000000 (CUDA documents this for __half2ll_rz and friends).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

// ---------------------------------------------------------------- C constants
// Spelled as the compiler's own <float.h>/<limits.h> and glibc's <math.h> spell them, each
// guarded, so those headers may come before or after this one.
#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_huge_valf())
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_huge_val())
#endif
#ifndef M_E
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif

#ifndef FLT_MAX
#define FLT_RADIX __FLT_RADIX__
#define FLT_MANT_DIG __FLT_MANT_DIG__
#define DBL_MANT_DIG __DBL_MANT_DIG__
#define FLT_DIG __FLT_DIG__
#define DBL_DIG __DBL_DIG__
#define FLT_MIN_EXP __FLT_MIN_EXP__
#define DBL_MIN_EXP __DBL_MIN_EXP__
#define FLT_MIN_10_EXP __FLT_MIN_10_EXP__
#define DBL_MIN_10_EXP __DBL_MIN_10_EXP__
#define FLT_MAX_EXP __FLT_MAX_EXP__
#define DBL_MAX_EXP __DBL_MAX_EXP__
#define FLT_MAX_10_EXP __FLT_MAX_10_EXP__
#define DBL_MAX_10_EXP __DBL_MAX_10_EXP__
#define FLT_MAX __FLT_MAX__
#define DBL_MAX __DBL_MAX__
#define FLT_EPSILON __FLT_EPSILON__
#define DBL_EPSILON __DBL_EPSILON__
#define FLT_MIN __FLT_MIN__
#define DBL_MIN __DBL_MIN__
#define FLT_TRUE_MIN __FLT_DENORM_MIN__
#define DBL_TRUE_MIN __DBL_DENORM_MIN__
#endif

#ifndef INT_MAX
#define CHAR_BIT __CHAR_BIT__
#define SCHAR_MAX __SCHAR_MAX__
#define SHRT_MAX __SHRT_MAX__
#define INT_MAX __INT_MAX__
#define LONG_MAX __LONG_MAX__
#define SCHAR_MIN (-__SCHAR_MAX__ - 1)
#define SHRT_MIN (-__SHRT_MAX__ - 1)
#define INT_MIN (-__INT_MAX__ - 1)
#define LONG_MIN (-__LONG_MAX__ - 1L)
#define UCHAR_MAX (__SCHAR_MAX__ * 2 + 1)
#define USHRT_MAX (__SHRT_MAX__ * 2 + 1)
#define UINT_MAX (__INT_MAX__ * 2U + 1U)
#define ULONG_MAX (__LONG_MAX__ * 2UL + 1UL)
#ifdef __CHAR_UNSIGNED__
#define CHAR_MIN 0
#define CHAR_MAX UCHAR_MAX
#else
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX __SCHAR_MAX__
#endif
#endif
#ifndef LLONG_MAX
#define LLONG_MAX __LONG_LONG_MAX__
#define LLONG_MIN (-__LONG_LONG_MAX__ - 1LL)
#define ULLONG_MAX (__LONG_LONG_MAX__ * 2ULL + 1ULL)
#endif

// ---------------------------------------------------------------- helpers
namespace cusim::values {

enum class rnd { rn, rz, rd, ru };

template <class To, class From>
constexpr To bits_as(From f) {
  return __builtin_bit_cast(To, f);
}
constexpr int sign_of(double v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

// 2^k as a double, k within [-1074, 1023].
constexpr double pow2(int k) {
  return k >= -1022 ? bits_as<double>(uint64_t(k + 1023) << 52) : bits_as<double>(uint64_t(1) << (k + 1074));
}

// The exact sum a + b is s + e.
inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// Rounds the exact value v + tail to a binary format with P significand bits and normal exponents
// EMIN..EMAX (float, half, bfloat16), in mode m. `tail` is the sign of what the double v lacks of
// the exact value, a remainder smaller than an ulp of v; 0 when v is exact. The result is a value
// of the format (or infinity) held in a double.
template <int P, int EMIN, int EMAX>
inline double round_to_format(double v, int tail, rnd m) {
  if (v != v || __builtin_isinf(v) || (v == 0 && tail == 0)) return v;
  const bool neg = __builtin_signbit(v);
  const double a = neg ? -v : v;
  const int s = neg ? -tail : tail;  // the tail's direction along a
  int e = int((bits_as<uint64_t>(a) >> 52) & 0x7ff) - 1023;
  if (e < EMIN) e = EMIN;  // subnormal in the format: a fixed spacing
  const double q = pow2(e - P + 1);
  const double t = a / q;  // exact, below 2^P
  const double n = double(uint64_t(t));
  const double fr = t - n;
  enum { nearest, down, away } dir = nearest;
  if (m == rnd::rz || (m == rnd::rd && !neg) || (m == rnd::ru && neg)) dir = down;
  else if (m != rnd::rn) dir = away;
  double r;
  if (fr == 0 && s <= 0) {
    // n * q, or just below it: the format's value under n * q is half a step lower at a binade start
    const bool at_binade = n == pow2(P - 1) && e > EMIN;
    r = (s < 0 && dir == down) ? n * q - (at_binade ? q / 2 : q) : n * q;
  } else {
    bool up = dir == away;
    if (dir == nearest) up = fr > 0.5 || (fr == 0.5 && (s > 0 || (s == 0 && (uint64_t(n) & 1))));
    r = (up ? n + 1 : n) * q;
  }
  const double max_finite = (pow2(P) - 1) * pow2(EMAX - P + 1);
  if (r > max_finite) r = dir == down ? max_finite : __builtin_inf();
  return neg ? -r : r;
}
template <rnd M>
inline float to_float(double v, int tail = 0) {
  return float(round_to_format<24, -126, 127>(v, tail, M));
}

// A double result r = RN(exact) moved to mode m, given err = the sign of exact - r.
inline double round_double(double r, int err, rnd m) {
  if (__builtin_isinf(r)) err = r > 0 ? -1 : 1;  // an overflow: the exact value is finite
  if (err == 0 || r != r || m == rnd::rn) return r;
  const bool lower = m == rnd::rd || (m == rnd::rz && r > 0);
  const bool higher = m == rnd::ru || (m == rnd::rz && r < 0);
  if (err < 0 && lower) return __builtin_nextafter(r, -__builtin_inf());
  if (err > 0 && higher) return __builtin_nextafter(r, __builtin_inf());
  return r;
}

// IEEE's sign for an exact zero sum of x and y: theirs when they agree, else -0 rounding down.
template <class T>
constexpr T zero_sum(T x, T y, rnd m) {
  if (x == 0 && y == 0 && __builtin_signbit(x) == __builtin_signbit(y)) return x;
  return m == rnd::rd ? T(-0.0) : T(0.0);
}

// The float operations with a rounding mode, exact through error-free transformations in double.
template <rnd M>
inline float fadd(float a, float b) {
  if constexpr (M == rnd::rn) {
    return a + b;
  } else {
    double s, e;
    two_sum(a, b, s, e);
    if (!__builtin_isfinite(s)) return float(s);
    if (s == 0) return zero_sum(a, b, M);
    return to_float<M>(s, sign_of(e));
  }
}
template <rnd M>
inline float fmul(float a, float b) {
  if constexpr (M == rnd::rn) return a * b;
  else return to_float<M>(double(a) * double(b));  // exact in double
}
template <rnd M>
inline float fdiv(float a, float b) {
  if constexpr (M == rnd::rn) {
    return a / b;
  } else {
    const double q = double(a) / double(b);
    if (!__builtin_isfinite(q) || q == 0) return float(q);
    const double r = __builtin_fma(-q, double(b), double(a));  // a - q b, exact
    return to_float<M>(q, sign_of(r) * sign_of(b));
  }
}
template <rnd M>
inline float fsqrt(float a) {
  if constexpr (M == rnd::rn) {
    return __builtin_sqrtf(a);
  } else {
    if (!(a > 0) || __builtin_isinf(a)) return __builtin_sqrtf(a);
    const double s = __builtin_sqrt(double(a));
    return to_float<M>(s, sign_of(__builtin_fma(-s, s, double(a))));
  }
}
template <rnd M>
inline float ffma(float a, float b, float c) {
  if constexpr (M == rnd::rn) {
    return __builtin_fmaf(a, b, c);
  } else {
    const double p = double(a) * double(b);
    double s, e;
    two_sum(p, c, s, e);
    if (!__builtin_isfinite(s)) return float(s);
    if (s == 0) return float(zero_sum(p, double(c), M));
    return to_float<M>(s, sign_of(e));
  }
}

// The double operations: the nearest result and the sign of its error.
template <rnd M>
inline double dadd(double a, double b) {
  double s, e;
  two_sum(a, b, s, e);
  if constexpr (M == rnd::rn) return s;
  if (s == 0) return zero_sum(a, b, M);
  if (!__builtin_isfinite(a) || !__builtin_isfinite(b)) return s;
  return round_double(s, sign_of(e), M);
}
// Near underflow the residual that signs the error would underflow too: the operands' fractions
// (frexp) and the result scaled alike keep it exact.
template <rnd M>
inline double dmul(double a, double b) {
  const double p = a * b;
  if constexpr (M == rnd::rn) return p;
  if (!__builtin_isfinite(a) || !__builtin_isfinite(b) || a == 0 || b == 0) return p;
  if (__builtin_fabs(p) >= 0x1p-960) return round_double(p, sign_of(__builtin_fma(a, b, -p)), M);
  int ea, eb;
  const double ma = __builtin_frexp(a, &ea), mb = __builtin_frexp(b, &eb);
  return round_double(p, sign_of(__builtin_fma(ma, mb, -__builtin_ldexp(p, -(ea + eb)))), M);
}
template <rnd M>
inline double ddiv(double a, double b) {
  const double q = a / b;
  if constexpr (M == rnd::rn) return q;
  if (!__builtin_isfinite(a) || !__builtin_isfinite(b) || b == 0 || a == 0) return q;
  if (__builtin_fabs(q) >= 0x1p-960) return round_double(q, sign_of(__builtin_fma(-q, b, a)) * sign_of(b), M);
  int ea, eb;
  const double ma = __builtin_frexp(a, &ea), mb = __builtin_frexp(b, &eb);
  return round_double(q, sign_of(__builtin_fma(-__builtin_ldexp(q, eb - ea), mb, ma)) * sign_of(b), M);
}
template <rnd M>
inline double dsqrt(double a) {
  const double s = __builtin_sqrt(a);
  if constexpr (M == rnd::rn) return s;
  if (!(a > 0) || __builtin_isinf(a)) return s;
  int e;
  double m = __builtin_frexp(a, &e);
  if (e & 1) m *= 2, e -= 1;  // a = m 2^e with e even: sqrt(a) = sqrt(m) 2^(e/2)
  const double t = __builtin_ldexp(s, -e / 2);
  return round_double(s, sign_of(__builtin_fma(-t, t, m)), M);
}

// Integer results of a float conversion, as cvt produces them: saturated, NaN to 0 (0x8000...
// for 64-bit integers).
template <class I>
inline I saturate_int(double t) {
  constexpr int bits = int(sizeof(I) * 8);
  if (t != t) return bits == 64 ? I(uint64_t(1) << 63) : I(0);
  if constexpr (std::is_signed_v<I>) {
    if (t >= pow2(bits - 1)) return std::numeric_limits<I>::max();
    if (t < -pow2(bits - 1)) return std::numeric_limits<I>::min();
  } else {
    if (t >= pow2(bits)) return std::numeric_limits<I>::max();
    if (t < 0) return I(0);
  }
  return I(t);
}
// Ties to even, whatever the floating-point environment. Not __builtin_roundeven: GCC lowers it to
// a call of C23's roundeven, which the kernel library does not have.
inline double round_even(double x) {
  const double r = __builtin_round(x);  // ties away from zero
  return __builtin_fabs(x - __builtin_trunc(x)) == 0.5 ? 2.0 * __builtin_round(x * 0.5) : r;
}
template <class I, rnd M>
inline I to_int(double x) {
  if constexpr (M == rnd::rn) return saturate_int<I>(round_even(x));
  else if constexpr (M == rnd::rz) return saturate_int<I>(__builtin_trunc(x));
  else if constexpr (M == rnd::rd) return saturate_int<I>(__builtin_floor(x));
  else return saturate_int<I>(__builtin_ceil(x));
}

// A 64-bit integer as the nearest double and the sign of what that lacks.
template <class I>
inline double int_to_double(I i, int& tail) {
  const double d = double(i);
  const __int128 diff = __int128(i) - __int128(d);
  tail = diff > 0 ? 1 : diff < 0 ? -1 : 0;
  return d;
}

// A double as odd integer times a power of two (d > 0, finite).
inline void odd_times_pow2(double d, uint64_t& n, int& e) {
  const uint64_t b = bits_as<uint64_t>(d);
  const int be = int(b >> 52);
  n = (b & ((uint64_t(1) << 52) - 1)) | (be ? uint64_t(1) << 52 : 0);
  e = (be ? be : 1) - 1075;
  const int tz = __builtin_ctzll(n);
  n >>= tz;
  e += tz;
}
// The sign of x m^2 - 1, exactly, for a float x and an m of at most 26 significant bits.
inline int cmp_x_m2_one(float x, double m) {
  uint64_t nx, nm;
  int ex, em;
  odd_times_pow2(double(x), nx, ex);
  odd_times_pow2(m, nm, em);
  const unsigned __int128 p = (unsigned __int128)nx * nm * nm;  // below 2^76
  const int e = ex + 2 * em;
  if (e >= 0) return (p == 1 && e == 0) ? 0 : 1;
  if (-e >= 100) return -1;
  const unsigned __int128 one = (unsigned __int128)1 << -e;
  return p > one ? 1 : p < one ? -1 : 0;
}
// 1/sqrt(x) correctly rounded: the double estimate, checked against the neighbouring midpoints.
inline float rsqrt_rn(float x) {
  if (!(x > 0) || __builtin_isinf(x)) return 1.0f / __builtin_sqrtf(x);
  float r = float(1.0 / __builtin_sqrt(double(x)));
  const float below = __builtin_nextafterf(r, 0.0f), above = __builtin_nextafterf(r, __builtin_inff());
  if (cmp_x_m2_one(x, 0.5 * (double(r) + double(above))) < 0) r = above;        // 1/sqrt(x) above the midpoint
  else if (cmp_x_m2_one(x, 0.5 * (double(r) + double(below))) > 0) r = below;   // below the lower one
  return r;
}

constexpr double pi_hi = 3.141592653589793116;
constexpr double pi_lo = 1.2246467991473532e-16;
// sin(pi x) and cos(pi x): reduced exactly to t in [-1/4, 1/4] and a quadrant.
inline double sincospi_reduce(double x, int& quadrant) {
  const double r = __builtin_fmod(x, 2.0);
  const double k = round_even(r * 2.0);
  quadrant = int(k) & 3;
  const double t = r - k * 0.5;
  return __builtin_fma(t, pi_hi, t * pi_lo);
}
inline double sinpi(double x) {
  if (!__builtin_isfinite(x)) return x - x;
  int q;
  const double t = sincospi_reduce(x, q);
  const double s = q == 0 ? __builtin_sin(t) : q == 1 ? __builtin_cos(t) : q == 2 ? -__builtin_sin(t) : -__builtin_cos(t);
  return s == 0 ? __builtin_copysign(0.0, x) : s;  // sinpi(n) is a zero of x's sign
}
inline double cospi(double x) {
  if (!__builtin_isfinite(x)) return x - x;
  int q;
  const double t = sincospi_reduce(x, q);
  const double c = q == 0 ? __builtin_cos(t) : q == 1 ? -__builtin_sin(t) : q == 2 ? -__builtin_cos(t) : __builtin_sin(t);
  return c == 0 ? 0.0 : c;  // cospi(n + 1/2) is +0
}

// erfcx(x) = exp(x^2) erfc(x), without overflow for large x.
inline double erfcx(double x) {
  if (x != x) return x;
  if (x < 26) {
    const double x2 = x * x, x2_lo = __builtin_fma(x, x, -x2);  // x^2 exactly
    if (x2 > 709) return __builtin_inf();                        // x < -26.6: 2 exp(x^2) overflows
    const double ex = __builtin_exp(x2) * (1 + x2_lo);
    return x < 0 ? 2 * ex - ex * __builtin_erfc(-x) : ex * __builtin_erfc(x);
  }
  if (__builtin_isinf(x)) return 0.0;
  // The asymptotic series: its terms fall below double precision by the eighth for x >= 26.
  const double y = 1 / (2 * x * x);
  double term = 1, sum = 1;
  for (int k = 1; k <= 8; ++k) {
    term *= -(2 * k - 1) * y;
    sum += term;
  }
  return sum / (x * 1.7724538509055160273);
}
constexpr double two_over_sqrt_pi = 1.1283791670955125739;
// erfinv by Newton's method on erf (or on erfc near +-1, where 1 - |y| is exact), from the
// single precision estimate of M. Giles, "Approximating the erfinv function" (2012).
inline double erfinv(double y) {
  if (!(y >= -1 && y <= 1)) return __builtin_nan("");
  if (y == 1 || y == -1) return y * __builtin_inf();
  if (y == 0) return y;
  const double a = __builtin_fabs(y);
  double w = -__builtin_log1p(-a * a), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = __builtin_sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * a;
  for (int i = 0; i < 4; ++i) {
    const double err = a <= 0.5 ? __builtin_erf(x) - a : (1 - a) - __builtin_erfc(x);
    const double step = err / (two_over_sqrt_pi * __builtin_exp(-x * x));
    x -= step;
    if (__builtin_fabs(step) <= 0x1p-60 * x) break;
  }
  return __builtin_copysign(x, y);
}
// erfcinv: erfinv(1 - y) where that is exact, else Newton's method on log(erfc(x)) = log(y),
// which stays representable however small y is.
inline double erfcinv(double y) {
  if (!(y >= 0 && y <= 2)) return __builtin_nan("");
  if (y == 0) return __builtin_inf();
  if (y == 2) return -__builtin_inf();
  if (y >= 0.5 && y <= 1.5) return erfinv(1 - y);
  if (y > 1.5) return -erfcinv(2 - y);
  const double ly = __builtin_log(y);
  double x = __builtin_sqrt(-ly);
  x = __builtin_sqrt(-ly - __builtin_log(x * 1.7724538509055160273));
  for (int i = 0; i < 8; ++i) {
    const double cx = erfcx(x), x2 = x * x;
    const double g = __builtin_log(cx) - x2 - __builtin_fma(x, x, -x2) - ly;  // log(erfc(x)) - log(y)
    const double step = g * cx / -two_over_sqrt_pi;   // g / g'
    x -= step;
    if (__builtin_fabs(step) <= 0x1p-60 * x) break;
  }
  return x;
}
// normcdf(x) = erfc(-x / sqrt(2)) / 2, with the rounding of x / sqrt(2) corrected to first order.
inline double normcdf(double x) {
  constexpr double r_hi = 0.70710678118654757, r_lo = -4.8336466567264567e-17;
  const double t = x * r_hi;
  const double dt = __builtin_fma(x, r_hi, -t) + x * r_lo;
  return 0.5 * (__builtin_erfc(-t) + dt * two_over_sqrt_pi * __builtin_exp(-t * t));
}

template <class T>
inline constexpr bool is_arith_v = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
}  // namespace cusim::values

// ---------------------------------------------------------------- type punning
constexpr float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
constexpr int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
constexpr float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
constexpr unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
constexpr double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
constexpr long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
constexpr int __double2hiint(double x) { return int(__builtin_bit_cast(unsigned long long, x) >> 32); }
constexpr int __double2loint(double x) { return int(unsigned(__builtin_bit_cast(unsigned long long, x))); }
constexpr double __hiloint2double(int hi, int lo) {
  return __builtin_bit_cast(double, (static_cast<unsigned long long>(unsigned(hi)) << 32) | unsigned(lo));
}

// ---------------------------------------------------------------- functions of one float
// name(double), name##f(float), and C++'s name(float) and name(integer) -> double.
#define CUDA_CPU_UNARY(RF, RD, name, fexpr, dexpr)                     \
  inline RD name(double x) { return dexpr; }                           \
  inline RF name##f(float x) { return fexpr; }                         \
  inline RF name(float x) { return name##f(x); }                       \
  template <class T>                                                   \
    requires std::is_integral_v<T>                                     \
  inline RD name(T x) {                                                \
    return name(double(x));                                            \
  }
#define CUDA_CPU_FP(name, fexpr, dexpr) CUDA_CPU_UNARY(float, double, name, fexpr, dexpr)
// Computed in double and rounded once.
#define CUDA_CPU_FP_VIA_D(name, dexpr) CUDA_CPU_UNARY(float, double, name, float(name(double(x))), dexpr)

CUDA_CPU_FP(sqrt, __builtin_sqrtf(x), __builtin_sqrt(x))
CUDA_CPU_FP(cbrt, __builtin_cbrtf(x), __builtin_cbrt(x))
CUDA_CPU_FP(exp, __builtin_expf(x), __builtin_exp(x))
CUDA_CPU_FP(exp2, __builtin_exp2f(x), __builtin_exp2(x))
#if __has_builtin(__builtin_exp10)
CUDA_CPU_FP(exp10, __builtin_exp10f(x), __builtin_exp10(x))
#else  // clang before 18: 10 is exact, so pow rounds 10^x as closely
CUDA_CPU_FP(exp10, __builtin_powf(10.0f, x), __builtin_pow(10.0, x))
#endif
CUDA_CPU_FP(expm1, __builtin_expm1f(x), __builtin_expm1(x))
CUDA_CPU_FP(log, __builtin_logf(x), __builtin_log(x))
CUDA_CPU_FP(log2, __builtin_log2f(x), __builtin_log2(x))
CUDA_CPU_FP(log10, __builtin_log10f(x), __builtin_log10(x))
CUDA_CPU_FP(log1p, __builtin_log1pf(x), __builtin_log1p(x))
CUDA_CPU_FP(logb, __builtin_logbf(x), __builtin_logb(x))
CUDA_CPU_FP(sin, __builtin_sinf(x), __builtin_sin(x))
CUDA_CPU_FP(cos, __builtin_cosf(x), __builtin_cos(x))
CUDA_CPU_FP(tan, __builtin_tanf(x), __builtin_tan(x))
CUDA_CPU_FP(asin, __builtin_asinf(x), __builtin_asin(x))
CUDA_CPU_FP(acos, __builtin_acosf(x), __builtin_acos(x))
CUDA_CPU_FP(atan, __builtin_atanf(x), __builtin_atan(x))
CUDA_CPU_FP(sinh, __builtin_sinhf(x), __builtin_sinh(x))
CUDA_CPU_FP(cosh, __builtin_coshf(x), __builtin_cosh(x))
CUDA_CPU_FP(tanh, __builtin_tanhf(x), __builtin_tanh(x))
CUDA_CPU_FP(asinh, __builtin_asinhf(x), __builtin_asinh(x))
CUDA_CPU_FP(acosh, __builtin_acoshf(x), __builtin_acosh(x))
CUDA_CPU_FP(atanh, __builtin_atanhf(x), __builtin_atanh(x))
CUDA_CPU_FP(erf, __builtin_erff(x), __builtin_erf(x))
CUDA_CPU_FP(erfc, __builtin_erfcf(x), __builtin_erfc(x))
CUDA_CPU_FP(fabs, __builtin_fabsf(x), __builtin_fabs(x))
CUDA_CPU_FP(floor, __builtin_floorf(x), __builtin_floor(x))
CUDA_CPU_FP(ceil, __builtin_ceilf(x), __builtin_ceil(x))
CUDA_CPU_FP(trunc, __builtin_truncf(x), __builtin_trunc(x))
CUDA_CPU_FP(round, __builtin_roundf(x), __builtin_round(x))
CUDA_CPU_FP(rint, __builtin_rintf(x), __builtin_rint(x))
CUDA_CPU_FP(nearbyint, __builtin_rintf(x), __builtin_rint(x))
CUDA_CPU_FP(rsqrt, cusim::values::rsqrt_rn(x), double(1.0L / __builtin_sqrtl(x)))
CUDA_CPU_FP_VIA_D(rcbrt, double(1.0L / __builtin_cbrtl(x)))
CUDA_CPU_FP_VIA_D(lgamma, __builtin_lgamma(x))
CUDA_CPU_FP_VIA_D(tgamma, __builtin_tgamma(x))
CUDA_CPU_FP_VIA_D(sinpi, cusim::values::sinpi(x))
CUDA_CPU_FP_VIA_D(cospi, cusim::values::cospi(x))
CUDA_CPU_FP_VIA_D(erfinv, cusim::values::erfinv(x))
CUDA_CPU_FP_VIA_D(erfcinv, cusim::values::erfcinv(x))
CUDA_CPU_FP_VIA_D(erfcx, cusim::values::erfcx(x))
CUDA_CPU_FP_VIA_D(normcdf, cusim::values::normcdf(x))
CUDA_CPU_FP_VIA_D(normcdfinv, -1.4142135623730950488 * cusim::values::erfcinv(2 * x))
#undef CUDA_CPU_FP_VIA_D
#undef CUDA_CPU_FP
// To an integer: lrint & co. saturate like the cvt they compile to.
#define CUDA_CPU_TO_INT(R, name, expr) CUDA_CPU_UNARY(R, R, name, expr, expr)
CUDA_CPU_TO_INT(int, ilogb, __builtin_ilogb(double(x)))
CUDA_CPU_TO_INT(long, lrint, (cusim::values::to_int<long, cusim::values::rnd::rn>(x)))
CUDA_CPU_TO_INT(long long, llrint, (cusim::values::to_int<long long, cusim::values::rnd::rn>(x)))
CUDA_CPU_TO_INT(long, lround, cusim::values::saturate_int<long>(__builtin_round(double(x))))
CUDA_CPU_TO_INT(long long, llround, cusim::values::saturate_int<long long>(__builtin_round(double(x))))
#undef CUDA_CPU_TO_INT
#undef CUDA_CPU_UNARY

// ---------------------------------------------------------------- functions of two and three
// C++ promotes a mixed or integer call to double, as <cmath> does.
#define CUDA_CPU_BINARY(name, fexpr, dexpr)                                              \
  inline float name##f(float x, float y) { return fexpr; }                               \
  inline double name(double x, double y) { return dexpr; }                               \
  inline float name(float x, float y) { return name##f(x, y); }                          \
  template <class A, class B>                                                            \
    requires(cusim::values::is_arith_v<A> && cusim::values::is_arith_v<B>)               \
  inline double name(A x, B y) {                                                         \
    return name(double(x), double(y));                                                   \
  }
CUDA_CPU_BINARY(pow, __builtin_powf(x, y), __builtin_pow(x, y))
CUDA_CPU_BINARY(atan2, __builtin_atan2f(x, y), __builtin_atan2(x, y))
CUDA_CPU_BINARY(hypot, __builtin_hypotf(x, y), __builtin_hypot(x, y))
CUDA_CPU_BINARY(rhypot, float(1 / __builtin_hypot(x, y)), double(1.0L / __builtin_hypotl(x, y)))
CUDA_CPU_BINARY(fmod, __builtin_fmodf(x, y), __builtin_fmod(x, y))
CUDA_CPU_BINARY(remainder, __builtin_remainderf(x, y), __builtin_remainder(x, y))
CUDA_CPU_BINARY(fmax, __builtin_fmaxf(x, y), __builtin_fmax(x, y))
CUDA_CPU_BINARY(fmin, __builtin_fminf(x, y), __builtin_fmin(x, y))
CUDA_CPU_BINARY(fdim, __builtin_fdimf(x, y), __builtin_fdim(x, y))
CUDA_CPU_BINARY(copysign, __builtin_copysignf(x, y), __builtin_copysign(x, y))
CUDA_CPU_BINARY(nextafter, __builtin_nextafterf(x, y), __builtin_nextafter(x, y))
#undef CUDA_CPU_BINARY

inline float fmaf(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
inline double fma(double x, double y, double z) { return __builtin_fma(x, y, z); }
inline float fma(float x, float y, float z) { return fmaf(x, y, z); }
template <class A, class B, class C>
  requires(cusim::values::is_arith_v<A> && cusim::values::is_arith_v<B> && cusim::values::is_arith_v<C>)
inline double fma(A x, B y, C z) {
  return fma(double(x), double(y), double(z));
}

inline float fdividef(float x, float y) { return x / y; }
// The float norms: the squares (exact in double) summed in double, the root rounded once to float.
inline float norm3df(float a, float b, float c) {
  return float(__builtin_sqrt(double(a) * a + double(b) * b + double(c) * c));
}
inline float rnorm3df(float a, float b, float c) {
  return float(1 / __builtin_sqrt(double(a) * a + double(b) * b + double(c) * c));
}
inline float norm4df(float a, float b, float c, float d) {
  return float(__builtin_sqrt(double(a) * a + double(b) * b + double(c) * c + double(d) * d));
}
inline float rnorm4df(float a, float b, float c, float d) {
  return float(1 / __builtin_sqrt(double(a) * a + double(b) * b + double(c) * c + double(d) * d));
}
inline double norm3d(double a, double b, double c) { return __builtin_hypot(__builtin_hypot(a, b), c); }
inline double rnorm3d(double a, double b, double c) { return 1 / norm3d(a, b, c); }
inline double norm4d(double a, double b, double c, double d) {
  return __builtin_hypot(__builtin_hypot(a, b), __builtin_hypot(c, d));
}
inline double rnorm4d(double a, double b, double c, double d) { return 1 / norm4d(a, b, c, d); }
inline float normf(int dim, const float* p) {
  double s = 0;
  for (int i = 0; i < dim; ++i) s += double(p[i]) * p[i];
  return float(__builtin_sqrt(s));
}
inline float rnormf(int dim, const float* p) { return 1 / normf(dim, p); }
inline double norm(int dim, const double* p) {
  double s = 0;
  for (int i = 0; i < dim; ++i) s = __builtin_hypot(s, p[i]);
  return s;
}
inline double rnorm(int dim, const double* p) { return 1 / norm(dim, p); }

// ---------------------------------------------------------------- with an integer or pointer
inline float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
inline double ldexp(double x, int e) { return __builtin_ldexp(x, e); }
inline float ldexp(float x, int e) { return ldexpf(x, e); }
inline float scalbnf(float x, int e) { return __builtin_scalbnf(x, e); }
inline double scalbn(double x, int e) { return __builtin_scalbn(x, e); }
inline float scalbn(float x, int e) { return scalbnf(x, e); }
inline float scalblnf(float x, long e) { return __builtin_scalblnf(x, e); }
inline double scalbln(double x, long e) { return __builtin_scalbln(x, e); }
inline float scalbln(float x, long e) { return scalblnf(x, e); }
inline float frexpf(float x, int* e) { return __builtin_frexpf(x, e); }
inline double frexp(double x, int* e) { return __builtin_frexp(x, e); }
inline float frexp(float x, int* e) { return frexpf(x, e); }
inline float modff(float x, float* i) { return __builtin_modff(x, i); }
inline double modf(double x, double* i) { return __builtin_modf(x, i); }
inline float modf(float x, float* i) { return modff(x, i); }
inline float remquof(float x, float y, int* q) { return __builtin_remquof(x, y, q); }
inline double remquo(double x, double y, int* q) { return __builtin_remquo(x, y, q); }
inline float remquo(float x, float y, int* q) { return remquof(x, y, q); }
inline float nanf(const char* tag) { return __builtin_nanf(tag); }
inline double nan(const char* tag) { return __builtin_nan(tag); }
inline void sincosf(float x, float* s, float* c) {
  *s = sinf(x);
  *c = cosf(x);
}
inline void sincos(double x, double* s, double* c) {
  *s = sin(x);
  *c = cos(x);
}
inline void sincos(float x, float* s, float* c) { sincosf(x, s, c); }
inline void sincospif(float x, float* s, float* c) {
  *s = sinpif(x);
  *c = cospif(x);
}
inline void sincospi(double x, double* s, double* c) {
  *s = sinpi(x);
  *c = cospi(x);
}
inline void sincospi(float x, float* s, float* c) { sincospif(x, s, c); }

// ---------------------------------------------------------------- classification
#define CUDA_CPU_CLASSIFY(name, builtin)                    \
  constexpr bool name(float x) { return builtin(x); }       \
  constexpr bool name(double x) { return builtin(x); }      \
  template <class T>                                        \
    requires std::is_integral_v<T>                          \
  constexpr bool name(T x) {                                \
    return builtin(double(x));                              \
  }
CUDA_CPU_CLASSIFY(isnan, __builtin_isnan)
CUDA_CPU_CLASSIFY(isinf, __builtin_isinf)
CUDA_CPU_CLASSIFY(isfinite, __builtin_isfinite)
CUDA_CPU_CLASSIFY(isnormal, __builtin_isnormal)
#undef CUDA_CPU_CLASSIFY
// the sign bit itself (clang's __builtin_signbit is not constexpr before 17)
constexpr bool signbit(float x) { return __builtin_bit_cast(uint32_t, x) >> 31; }
constexpr bool signbit(double x) { return __builtin_bit_cast(uint64_t, x) >> 63; }
template <class T>
  requires std::is_integral_v<T>
constexpr bool signbit(T x) {
  return x < 0;
}

// ---------------------------------------------------------------- abs
// C's abs/labs/llabs are the C library's (also declared by <stdlib.h>, which <new> reaches);
// the C++ overloads are constrained templates, so that the ones libc++'s <stdlib.h> adds, where
// that is included, win without a clash.
extern "C" int abs(int) noexcept;
extern "C" long labs(long) noexcept;
extern "C" long long llabs(long long) noexcept;
template <class T>
  requires(std::is_same_v<T, long> || std::is_same_v<T, long long>)
constexpr T abs(T x) {
  return x < 0 ? T(-x) : x;
}
template <class T>
  requires(std::is_same_v<T, float> || std::is_same_v<T, double>)
constexpr T abs(T x) {
  return __builtin_fabs(x);
}

// ---------------------------------------------------------------- min and max
// The overloads CUDA's math_functions.hpp declares: mixed signedness compares as unsigned, mixed
// float and double as double; an int with a float has no overload (ambiguous, as with nvcc).
namespace cusim::values {
template <class T>
constexpr T min_of(T a, T b) {
  return b < a ? b : a;
}
template <class T>
constexpr T max_of(T a, T b) {
  return b > a ? b : a;
}
}  // namespace cusim::values
#define CUDA_CPU_MINMAX(R, A, B)                                                      \
  constexpr R min(A a, B b) { return cusim::values::min_of<R>(static_cast<R>(a), static_cast<R>(b)); }          \
  constexpr R max(A a, B b) { return cusim::values::max_of<R>(static_cast<R>(a), static_cast<R>(b)); }
constexpr unsigned int umin(unsigned int a, unsigned int b) { return b < a ? b : a; }
constexpr unsigned int umax(unsigned int a, unsigned int b) { return b > a ? b : a; }
constexpr long long llmin(long long a, long long b) { return b < a ? b : a; }
constexpr long long llmax(long long a, long long b) { return b > a ? b : a; }
constexpr unsigned long long ullmin(unsigned long long a, unsigned long long b) { return b < a ? b : a; }
constexpr unsigned long long ullmax(unsigned long long a, unsigned long long b) { return b > a ? b : a; }
CUDA_CPU_MINMAX(int, int, int)
CUDA_CPU_MINMAX(unsigned int, unsigned int, unsigned int)
CUDA_CPU_MINMAX(unsigned int, int, unsigned int)
CUDA_CPU_MINMAX(unsigned int, unsigned int, int)
CUDA_CPU_MINMAX(long, long, long)
CUDA_CPU_MINMAX(unsigned long, unsigned long, unsigned long)
CUDA_CPU_MINMAX(unsigned long, long, unsigned long)
CUDA_CPU_MINMAX(unsigned long, unsigned long, long)
CUDA_CPU_MINMAX(long long, long long, long long)
CUDA_CPU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
CUDA_CPU_MINMAX(unsigned long long, long long, unsigned long long)
CUDA_CPU_MINMAX(unsigned long long, unsigned long long, long long)
#undef CUDA_CPU_MINMAX
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline double min(double a, double b) { return __builtin_fmin(a, b); }
inline double max(double a, double b) { return __builtin_fmax(a, b); }
inline double min(float a, double b) { return __builtin_fmin(a, b); }
inline double max(float a, double b) { return __builtin_fmax(a, b); }
inline double min(double a, float b) { return __builtin_fmin(a, b); }
inline double max(double a, float b) { return __builtin_fmax(a, b); }

// ---------------------------------------------------------------- fast-math intrinsics
// On the GPU these are hardware approximations; here the precise functions.
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { sincosf(x, s, c); }
// CUDA documents this corner: a divisor beyond 2^126 gives 0 (NaN for an infinite x).
inline float __fdividef(float x, float y) {
  const float ay = __builtin_fabsf(y);
  if (ay > 0x1p126f && ay < __builtin_inff()) return __builtin_isinf(x) ? __builtin_nanf("") : 0.0f * x * y;
  return x / y;
}
constexpr float __saturatef(float x) { return x > 1.0f ? 1.0f : x > 0.0f ? x : 0.0f; }  // NaN -> 0

// ---------------------------------------------------------------- explicit rounding modes
#define CUDA_CPU_ROUNDED(suffix, M)                                                                   \
  inline float __fadd_##suffix(float a, float b) { return cusim::values::fadd<M>(a, b); }             \
  inline float __fsub_##suffix(float a, float b) { return cusim::values::fadd<M>(a, -b); }            \
  inline float __fmul_##suffix(float a, float b) { return cusim::values::fmul<M>(a, b); }             \
  inline float __fdiv_##suffix(float a, float b) { return cusim::values::fdiv<M>(a, b); }             \
  inline float __frcp_##suffix(float a) { return cusim::values::fdiv<M>(1.0f, a); }                   \
  inline float __fsqrt_##suffix(float a) { return cusim::values::fsqrt<M>(a); }                       \
  inline float __fmaf_##suffix(float a, float b, float c) { return cusim::values::ffma<M>(a, b, c); } \
  inline float __fmaf_ieee_##suffix(float a, float b, float c) { return cusim::values::ffma<M>(a, b, c); } \
  inline double __dadd_##suffix(double a, double b) { return cusim::values::dadd<M>(a, b); }          \
  inline double __dsub_##suffix(double a, double b) { return cusim::values::dadd<M>(a, -b); }         \
  inline double __dmul_##suffix(double a, double b) { return cusim::values::dmul<M>(a, b); }          \
  inline double __ddiv_##suffix(double a, double b) { return cusim::values::ddiv<M>(a, b); }          \
  inline double __drcp_##suffix(double a) { return cusim::values::ddiv<M>(1.0, a); }                 \
  inline double __dsqrt_##suffix(double a) { return cusim::values::dsqrt<M>(a); }                    \
  inline double __fma_##suffix(double a, double b, double c) { return __builtin_fma(a, b, c); }       \
  inline int __float2int_##suffix(float x) { return cusim::values::to_int<int, M>(x); }               \
  inline unsigned int __float2uint_##suffix(float x) { return cusim::values::to_int<unsigned, M>(x); } \
  inline long long __float2ll_##suffix(float x) { return cusim::values::to_int<long long, M>(x); }    \
  inline unsigned long long __float2ull_##suffix(float x) {                                           \
    return cusim::values::to_int<unsigned long long, M>(x);                                           \
  }                                                                                                   \
  inline int __double2int_##suffix(double x) { return cusim::values::to_int<int, M>(x); }             \
  inline unsigned int __double2uint_##suffix(double x) { return cusim::values::to_int<unsigned, M>(x); } \
  inline long long __double2ll_##suffix(double x) { return cusim::values::to_int<long long, M>(x); }  \
  inline unsigned long long __double2ull_##suffix(double x) {                                         \
    return cusim::values::to_int<unsigned long long, M>(x);                                           \
  }                                                                                                   \
  inline float __double2float_##suffix(double x) {                                                    \
    return M == cusim::values::rnd::rn ? float(x) : cusim::values::to_float<M>(x);                    \
  }                                                                                                   \
  inline float __int2float_##suffix(int i) { return cusim::values::to_float<M>(double(i)); }          \
  inline float __uint2float_##suffix(unsigned int i) { return cusim::values::to_float<M>(double(i)); } \
  inline float __ll2float_##suffix(long long i) {                                                     \
    int tail;                                                                                         \
    const double d = cusim::values::int_to_double(i, tail);                                           \
    return cusim::values::to_float<M>(d, tail);                                                       \
  }                                                                                                   \
  inline float __ull2float_##suffix(unsigned long long i) {                                           \
    int tail;                                                                                         \
    const double d = cusim::values::int_to_double(i, tail);                                           \
    return cusim::values::to_float<M>(d, tail);                                                       \
  }                                                                                                   \
  inline double __ll2double_##suffix(long long i) {                                                   \
    int tail;                                                                                         \
    const double d = cusim::values::int_to_double(i, tail);                                           \
    return cusim::values::round_double(d, tail, M);                                                   \
  }                                                                                                   \
  inline double __ull2double_##suffix(unsigned long long i) {                                         \
    int tail;                                                                                         \
    const double d = cusim::values::int_to_double(i, tail);                                           \
    return cusim::values::round_double(d, tail, M);                                                   \
  }
CUDA_CPU_ROUNDED(rn, cusim::values::rnd::rn)
CUDA_CPU_ROUNDED(rz, cusim::values::rnd::rz)
CUDA_CPU_ROUNDED(rd, cusim::values::rnd::rd)
CUDA_CPU_ROUNDED(ru, cusim::values::rnd::ru)
#undef CUDA_CPU_ROUNDED
inline float __frsqrt_rn(float x) { return cusim::values::rsqrt_rn(x); }
constexpr double __int2double_rn(int i) { return double(i); }
constexpr double __uint2double_rn(unsigned int i) { return double(i); }

// ---------------------------------------------------------------- integer intrinsics
// Counted by hand: __builtin_popcount calls libgcc's __popcountdi2 on x86-64, outside a kernel's reach.
constexpr int __popcll(unsigned long long x) {
  int n = 0;
  for (; x; x &= x - 1) ++n;
  return n;
}
constexpr int __popc(unsigned int x) { return __popcll(x); }
constexpr int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
constexpr int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
constexpr int __ffs(int x) { return __builtin_ffs(x); }
constexpr int __ffsll(long long x) { return __builtin_ffsll(x); }
constexpr unsigned long long __brevll(unsigned long long x) {
  unsigned long long r = 0;
  for (int i = 0; i < 64; i++) r |= ((x >> i) & 1ull) << (63 - i);
  return r;
}
constexpr unsigned int __brev(unsigned int x) { return (unsigned int)(__brevll(x) >> 32); }
// Byte n of the result is byte s<4n+2:4n> of y:x; CUDA documents the selector's fourth bits as unused.
constexpr unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned int r = 0;
  for (int n = 0; n < 4; ++n) r |= unsigned((v >> (((s >> (4 * n)) & 7u) * 8)) & 0xffu) << (8 * n);
  return r;
}
// The 64-bit hi:lo shifted; _l/_r take the shift modulo 32, _lc/_rc clamp it to 32.
constexpr unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned((((unsigned long long)hi << 32 | lo) << (shift & 31u)) >> 32);
}
constexpr unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned((((unsigned long long)hi << 32 | lo) << (shift < 32u ? shift : 32u)) >> 32);
}
constexpr unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned(((unsigned long long)hi << 32 | lo) >> (shift & 31u));
}
constexpr unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned(((unsigned long long)hi << 32 | lo) >> (shift < 32u ? shift : 32u));
}
// The low 24 bits of each operand (sign-extended for __mul24), the low 32 bits of the product.
constexpr int __mul24(int x, int y) {
  const long long a = int(unsigned(x) << 8) >> 8, b = int(unsigned(y) << 8) >> 8;
  return int(unsigned((unsigned long long)(a * b)));
}
constexpr unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
constexpr int __mulhi(int x, int y) { return int(((long long)x * y) >> 32); }
constexpr unsigned int __umulhi(unsigned int x, unsigned int y) { return unsigned(((unsigned long long)x * y) >> 32); }
constexpr long long __mul64hi(long long x, long long y) { return (long long)(((__int128)x * y) >> 64); }
constexpr unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
constexpr unsigned int __sad(int x, int y, unsigned int z) {
  return (x > y ? unsigned(x) - unsigned(y) : unsigned(y) - unsigned(x)) + z;
}
constexpr unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
// Averages without overflow: (x + y) >> 1 and (x + y + 1) >> 1.
constexpr int __hadd(int x, int y) { return int(((long long)x + y) >> 1); }
constexpr int __rhadd(int x, int y) { return int(((long long)x + y + 1) >> 1); }
constexpr unsigned int __uhadd(unsigned int x, unsigned int y) { return unsigned(((unsigned long long)x + y) >> 1); }
constexpr unsigned int __urhadd(unsigned int x, unsigned int y) {
  return unsigned(((unsigned long long)x + y + 1) >> 1);
}
// Dot products of packed bytes (and 16-bit halves with the low or high bytes, __dp2a).
constexpr int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += static_cast<signed char>(a >> (8 * i)) * static_cast<signed char>(b >> (8 * i));
  return c;
}
constexpr unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}
constexpr int __dp2a_lo(int a, int b, int c) {
  for (int i = 0; i < 2; ++i) c += short(a >> (16 * i)) * static_cast<signed char>(b >> (8 * i));
  return c;
}
constexpr int __dp2a_hi(int a, int b, int c) {
  for (int i = 0; i < 2; ++i) c += short(a >> (16 * i)) * static_cast<signed char>(b >> (8 * i + 16));
  return c;
}
constexpr unsigned int __dp2a_lo(unsigned int a, unsigned int b, unsigned int c) {
  for (int i = 0; i < 2; ++i) c += ((a >> (16 * i)) & 0xffffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}
constexpr unsigned int __dp2a_hi(unsigned int a, unsigned int b, unsigned int c) {
  for (int i = 0; i < 2; ++i) c += ((a >> (16 * i)) & 0xffffu) * ((b >> (8 * i + 16)) & 0xffu);
  return c;
}

// ---------------------------------------------------------------- std::
// <cmath>'s names in std as well, for kernels that call std::sqrt and friends.
namespace std {
using ::abs;
using ::acos, ::acosf, ::acosh, ::acoshf, ::asin, ::asinf, ::asinh, ::asinhf, ::atan, ::atan2, ::atan2f;
using ::atanf, ::atanh, ::atanhf, ::cbrt, ::cbrtf, ::ceil, ::ceilf, ::copysign, ::copysignf, ::cos, ::cosf;
using ::cosh, ::coshf, ::erf, ::erfc, ::erfcf, ::erff, ::exp, ::exp2, ::exp2f, ::expf, ::expm1, ::expm1f;
using ::fabs, ::fabsf, ::fdim, ::fdimf, ::floor, ::floorf, ::fma, ::fmaf, ::fmax, ::fmaxf, ::fmin, ::fminf;
using ::fmod, ::fmodf, ::frexp, ::frexpf, ::hypot, ::hypotf, ::ilogb, ::ilogbf, ::isfinite, ::isinf, ::isnan;
using ::isnormal, ::ldexp, ::ldexpf, ::lgamma, ::lgammaf, ::llrint, ::llrintf, ::llround, ::llroundf, ::log;
using ::log10, ::log10f, ::log1p, ::log1pf, ::log2, ::log2f, ::logb, ::logbf, ::logf, ::lrint, ::lrintf;
using ::lround, ::lroundf, ::modf, ::modff, ::nan, ::nanf, ::nearbyint, ::nearbyintf, ::nextafter;
using ::nextafterf, ::pow, ::powf, ::remainder, ::remainderf, ::remquo, ::remquof, ::rint, ::rintf, ::round;
using ::roundf, ::scalbln, ::scalblnf, ::scalbn, ::scalbnf, ::signbit, ::sin, ::sinf, ::sinh, ::sinhf;
using ::sqrt, ::sqrtf, ::tan, ::tanf, ::tanh, ::tanhf, ::tgamma, ::tgammaf, ::trunc, ::truncf;
using ::labs, ::llabs;
}  // namespace std
