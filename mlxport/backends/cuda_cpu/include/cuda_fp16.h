// CUDA's half precision (cuda_fp16.h) for device code on mlxport's CPU executor (C++20, clang):
// __half and __half2 (alias half, half2), their operators and the intrinsics.
//
// __half is a struct holding the 16 bits, as in CUDA: it converts implicitly from float, double
// and the integers and to float, the integers and bool, and has operators only with another
// __half. So h * 2.0f is ambiguous here exactly as with nvcc; kernels write h * __float2half(2.0f)
// or __half2float(h) * 2.0f. Every operation rounds to half once, to nearest even: it is computed
// in float (exact for + - * / and sqrt, since float has more than twice half's precision) and
// converted with clang's _Float16; __hfma rounds the exact a * b + c once. A NaN result is the
// canonical 0x7fff, as the GPU produces it. The functions (hexp, hsin, ...) are the float ones
// rounded to half: within an ulp of half, as CUDA's.
#pragma once

#include "cuda_math.h"
#include "cuda_types.h"

struct __half_raw {
  unsigned short x;
};
struct alignas(4) __half2_raw {
  unsigned short x, y;
};

struct __nv_bfloat16;

// ---------------------------------------------------------------- conversions on the bits
namespace cusim::values {
constexpr unsigned short kNaN16 = 0x7fff;  // the canonical NaN of half and bfloat16 alike

constexpr unsigned short half_bits(float f) {
  return f != f ? kNaN16 : __builtin_bit_cast(unsigned short, static_cast<_Float16>(f));
}
constexpr unsigned short half_bits(double d) {
  return d != d ? kNaN16 : __builtin_bit_cast(unsigned short, static_cast<_Float16>(d));  // one rounding
}
constexpr float half_value(unsigned short b) { return float(__builtin_bit_cast(_Float16, b)); }
template <rnd M>
inline unsigned short half_bits_rounded(double v, int tail = 0) {
  return half_bits(round_to_format<11, -14, 15>(v, tail, M));  // exact in half by then
}
template <rnd M, class I>
inline unsigned short half_bits_from_int(I i) {
  int tail = 0;
  const double d = sizeof(I) == 8 ? int_to_double(i, tail) : double(i);
  return half_bits_rounded<M>(d, tail);
}

// The operations shared by __half and __nv_bfloat16, on H = either: fp16_format<H> converts.
template <class H>
struct fp16_format;

template <class H>
constexpr unsigned short bits16(H h) {
  return __builtin_bit_cast(unsigned short, h);
}
template <class H>
constexpr H from_bits16(unsigned short b) {
  return __builtin_bit_cast(H, b);
}
template <class H>
constexpr float value(H h) {
  return fp16_format<H>::value(bits16(h));
}
template <class H>
constexpr H round16(float f) {
  return from_bits16<H>(fp16_format<H>::bits(f));
}
template <class H>
constexpr H one16() {
  return from_bits16<H>(fp16_format<H>::kOne);
}
template <class H>
constexpr bool is_nan16(H h) {
  return (bits16(h) & 0x7fff) > fp16_format<H>::kInf;
}

template <class H>
constexpr H add(H a, H b) {
  return round16<H>(value(a) + value(b));
}
template <class H>
constexpr H sub(H a, H b) {
  return round16<H>(value(a) - value(b));
}
template <class H>
constexpr H mul(H a, H b) {
  return round16<H>(value(a) * value(b));
}
template <class H>
constexpr H div(H a, H b) {
  return round16<H>(value(a) / value(b));
}
// a * b is exact in double; the sum is rounded once, from its error-free parts.
template <class H>
inline H fma16(H a, H b, H c) {
  using F = fp16_format<H>;
  const double p = double(value(a)) * double(value(b));
  double s, e;
  two_sum(p, double(value(c)), s, e);
  if (!__builtin_isfinite(s)) return round16<H>(float(s));
  if (s == 0) return round16<H>(float(zero_sum(p, double(value(c)), rnd::rn)));
  return round16<H>(float(round_to_format<F::P, F::EMIN, F::EMAX>(s, sign_of(e), rnd::rn)));
}
template <class H>
constexpr H neg(H a) {
  return from_bits16<H>(bits16(a) ^ 0x8000u);
}
template <class H>
constexpr H abs16(H a) {
  return from_bits16<H>(bits16(a) & 0x7fffu);
}
// [0, 1], NaN to +0.
template <class H>
constexpr H sat(H a) {
  const float v = value(a);
  return round16<H>(v > 1.0f ? 1.0f : v > 0.0f ? v : 0.0f);
}
template <class H>
constexpr H relu(H a) {
  return is_nan16(a) ? from_bits16<H>(kNaN16) : value(a) > 0.0f ? a : from_bits16<H>(0);
}
// max/min: a NaN loses to a number (both NaN: the canonical one), +0 is above -0; _nan: NaN wins.
template <class H>
constexpr H max16(H a, H b, bool nan_wins) {
  const bool na = is_nan16(a), nb = is_nan16(b);
  if (na || nb) return (na && nb) || nan_wins ? from_bits16<H>(kNaN16) : na ? b : a;
  const float x = value(a), y = value(b);
  if (x == y) return (bits16(a) & 0x8000u) ? b : a;
  return x > y ? a : b;
}
template <class H>
constexpr H min16(H a, H b, bool nan_wins) {
  const bool na = is_nan16(a), nb = is_nan16(b);
  if (na || nb) return (na && nb) || nan_wins ? from_bits16<H>(kNaN16) : na ? b : a;
  const float x = value(a), y = value(b);
  if (x == y) return (bits16(a) & 0x8000u) ? a : b;
  return x < y ? a : b;
}
template <class H>
constexpr int isinf16(H a) {
  return (bits16(a) & 0x7fffu) == fp16_format<H>::kInf ? ((bits16(a) & 0x8000u) ? -1 : 1) : 0;
}

template <class H2, class F>
constexpr H2 lanes(F f, H2 a) {
  return H2(f(a.x), f(a.y));
}
template <class H2, class F>
constexpr H2 lanes(F f, H2 a, H2 b) {
  return H2(f(a.x, b.x), f(a.y, b.y));
}
template <class H2, class F>
inline H2 lanes(F f, H2 a, H2 b, H2 c) {
  return H2(f(a.x, b.x, c.x), f(a.y, b.y, c.y));
}
// A comparison of two lanes: 1.0 or 0.0 in each, or a 0xffff mask, or both true.
template <class H2, class C>
constexpr H2 cmp2(C c, H2 a, H2 b) {
  using H = decltype(a.x);
  const unsigned short one = fp16_format<H>::kOne;
  return H2(from_bits16<H>(c(a.x, b.x) ? one : 0), from_bits16<H>(c(a.y, b.y) ? one : 0));
}
template <class H2, class C>
constexpr unsigned cmp2_mask(C c, H2 a, H2 b) {
  return (c(a.x, b.x) ? 0xffffu : 0u) | (c(a.y, b.y) ? 0xffff0000u : 0u);
}
}  // namespace cusim::values

// ---------------------------------------------------------------- __half, __half2
struct alignas(2) __half {
 protected:
  unsigned short __x;

 public:
  __half() = default;
  constexpr __half(const __half_raw& r) : __x(r.x) {}
  constexpr __half(float f) : __x(cusim::values::half_bits(f)) {}
  constexpr __half(double d) : __x(cusim::values::half_bits(d)) {}
  // The integers through double: exact below 2^53, and all beyond 65520 is infinite anyway.
  constexpr __half(short i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(unsigned short i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(int i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(unsigned int i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(long i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(unsigned long i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(long long i) : __x(cusim::values::half_bits(double(i))) {}
  constexpr __half(unsigned long long i) : __x(cusim::values::half_bits(double(i))) {}
  explicit __half(__nv_bfloat16 b);  // in cuda_bf16.h

  __half& operator=(const __half_raw& r) {
    __x = r.x;
    return *this;
  }
  volatile __half& operator=(const __half_raw& r) volatile {
    __x = r.x;
    return *this;
  }
  constexpr operator __half_raw() const { return __half_raw{__x}; }
  operator __half_raw() const volatile { return __half_raw{__x}; }

  constexpr operator float() const { return cusim::values::half_value(__x); }
  // As CUDA: to the integers rounding toward zero, saturated, NaN to 0; to bool, false for +-0.
  operator signed char() const { return cusim::values::to_int<signed char, cusim::values::rnd::rz>(float(*this)); }
  operator unsigned char() const { return cusim::values::to_int<unsigned char, cusim::values::rnd::rz>(float(*this)); }
  operator char() const { return cusim::values::to_int<char, cusim::values::rnd::rz>(float(*this)); }
  operator short() const { return cusim::values::to_int<short, cusim::values::rnd::rz>(float(*this)); }
  operator unsigned short() const { return cusim::values::to_int<unsigned short, cusim::values::rnd::rz>(float(*this)); }
  operator int() const { return cusim::values::to_int<int, cusim::values::rnd::rz>(float(*this)); }
  operator unsigned int() const { return cusim::values::to_int<unsigned int, cusim::values::rnd::rz>(float(*this)); }
  operator long() const { return cusim::values::to_int<long, cusim::values::rnd::rz>(float(*this)); }
  operator unsigned long() const { return cusim::values::to_int<unsigned long, cusim::values::rnd::rz>(float(*this)); }
  operator long long() const { return cusim::values::to_int<long long, cusim::values::rnd::rz>(float(*this)); }
  operator unsigned long long() const {
    return cusim::values::to_int<unsigned long long, cusim::values::rnd::rz>(float(*this));
  }
  constexpr operator bool() const { return (__x & 0x7fffu) != 0; }
};

struct alignas(4) __half2 {
  __half x, y;

  __half2() = default;
  constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
  constexpr __half2(const __half2_raw& r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
  __half2& operator=(const __half2_raw& r) {
    x = __half_raw{r.x};
    y = __half_raw{r.y};
    return *this;
  }
  constexpr operator __half2_raw() const {
    return __half2_raw{__half_raw(x).x, __half_raw(y).x};
  }
};

using half = __half;
using half2 = __half2;

static_assert(sizeof(__half) == 2 && alignof(__half) == 2 && sizeof(__half2) == 4 && alignof(__half2) == 4);
static_assert(std::is_trivially_copyable_v<__half> && std::is_trivially_copyable_v<__half2>);

template <>
struct cusim::values::fp16_format<__half> {
  static constexpr int P = 11, EMIN = -14, EMAX = 15;
  static constexpr unsigned short kInf = 0x7c00, kOne = 0x3c00;
  static constexpr float value(unsigned short b) { return half_value(b); }
  static constexpr unsigned short bits(float f) { return half_bits(f); }
};

// ---------------------------------------------------------------- what half and bfloat16 share
// The intrinsics and operators of H (__half or __nv_bfloat16) and its pair H2, written once.
#define CUDA_CPU_FP16_COMMON(H, H2)                                                                        \
  constexpr H __hadd(H a, H b) { return cusim::values::add(a, b); }                                         \
  constexpr H __hsub(H a, H b) { return cusim::values::sub(a, b); }                                         \
  constexpr H __hmul(H a, H b) { return cusim::values::mul(a, b); }                                         \
  constexpr H __hdiv(H a, H b) { return cusim::values::div(a, b); }                                         \
  constexpr H __hadd_rn(H a, H b) { return cusim::values::add(a, b); }                                      \
  constexpr H __hsub_rn(H a, H b) { return cusim::values::sub(a, b); }                                      \
  constexpr H __hmul_rn(H a, H b) { return cusim::values::mul(a, b); }                                      \
  inline H __hfma(H a, H b, H c) { return cusim::values::fma16(a, b, c); }                                  \
  constexpr H __hneg(H a) { return cusim::values::neg(a); }                                                 \
  constexpr H __habs(H a) { return cusim::values::abs16(a); }                                               \
  constexpr H __hadd_sat(H a, H b) { return cusim::values::sat(__hadd(a, b)); }                             \
  constexpr H __hsub_sat(H a, H b) { return cusim::values::sat(__hsub(a, b)); }                             \
  constexpr H __hmul_sat(H a, H b) { return cusim::values::sat(__hmul(a, b)); }                             \
  inline H __hfma_sat(H a, H b, H c) { return cusim::values::sat(__hfma(a, b, c)); }                        \
  inline H __hfma_relu(H a, H b, H c) { return cusim::values::relu(__hfma(a, b, c)); }                      \
  constexpr H __hmax(H a, H b) { return cusim::values::max16(a, b, false); }                                \
  constexpr H __hmin(H a, H b) { return cusim::values::min16(a, b, false); }                                \
  constexpr H __hmax_nan(H a, H b) { return cusim::values::max16(a, b, true); }                             \
  constexpr H __hmin_nan(H a, H b) { return cusim::values::min16(a, b, true); }                             \
  constexpr bool __heq(H a, H b) { return float(a) == float(b); }                                           \
  constexpr bool __hne(H a, H b) { return float(a) < float(b) || float(a) > float(b); }                     \
  constexpr bool __hlt(H a, H b) { return float(a) < float(b); }                                            \
  constexpr bool __hle(H a, H b) { return float(a) <= float(b); }                                           \
  constexpr bool __hgt(H a, H b) { return float(a) > float(b); }                                            \
  constexpr bool __hge(H a, H b) { return float(a) >= float(b); }                                           \
  constexpr bool __hequ(H a, H b) { return !__hne(a, b); }                                                  \
  constexpr bool __hneu(H a, H b) { return !__heq(a, b); }                                                  \
  constexpr bool __hltu(H a, H b) { return !__hge(a, b); }                                                  \
  constexpr bool __hleu(H a, H b) { return !__hgt(a, b); }                                                  \
  constexpr bool __hgtu(H a, H b) { return !__hle(a, b); }                                                  \
  constexpr bool __hgeu(H a, H b) { return !__hlt(a, b); }                                                  \
  constexpr bool __hisnan(H a) { return cusim::values::is_nan16(a); }                                       \
  constexpr int __hisinf(H a) { return cusim::values::isinf16(a); }                                         \
  inline H hsqrt(H a) { return cusim::values::round16<H>(sqrtf(float(a))); }                                \
  inline H hrsqrt(H a) { return cusim::values::round16<H>(rsqrtf(float(a))); }                              \
  inline H hrcp(H a) { return cusim::values::round16<H>(1.0f / float(a)); }                                 \
  inline H hexp(H a) { return cusim::values::round16<H>(expf(float(a))); }                                  \
  inline H hexp2(H a) { return cusim::values::round16<H>(exp2f(float(a))); }                                \
  inline H hexp10(H a) { return cusim::values::round16<H>(exp10f(float(a))); }                              \
  inline H hlog(H a) { return cusim::values::round16<H>(logf(float(a))); }                                  \
  inline H hlog2(H a) { return cusim::values::round16<H>(log2f(float(a))); }                                \
  inline H hlog10(H a) { return cusim::values::round16<H>(log10f(float(a))); }                              \
  inline H hsin(H a) { return cusim::values::round16<H>(sinf(float(a))); }                                  \
  inline H hcos(H a) { return cusim::values::round16<H>(cosf(float(a))); }                                  \
  inline H htanh(H a) { return cusim::values::round16<H>(tanhf(float(a))); }                               \
  inline H htanh_approx(H a) { return htanh(a); }                                                           \
  inline H hfloor(H a) { return cusim::values::round16<H>(floorf(float(a))); }                              \
  inline H hceil(H a) { return cusim::values::round16<H>(ceilf(float(a))); }                                \
  inline H htrunc(H a) { return cusim::values::round16<H>(truncf(float(a))); }                              \
  inline H hrint(H a) { return cusim::values::round16<H>(rintf(float(a))); }                                \
                                                                                                            \
  constexpr H2 __hadd2(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hadd), a, b); }                           \
  constexpr H2 __hsub2(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hsub), a, b); }                           \
  constexpr H2 __hmul2(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hmul), a, b); }                           \
  constexpr H2 __h2div(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hdiv), a, b); }                           \
  constexpr H2 __hadd2_rn(H2 a, H2 b) { return __hadd2(a, b); }                                             \
  constexpr H2 __hsub2_rn(H2 a, H2 b) { return __hsub2(a, b); }                                             \
  constexpr H2 __hmul2_rn(H2 a, H2 b) { return __hmul2(a, b); }                                             \
  inline H2 __hfma2(H2 a, H2 b, H2 c) { return cusim::values::lanes(CUDA_CPU_L3(H, __hfma), a, b, c); }                     \
  constexpr H2 __hneg2(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, __hneg), a); }                                    \
  constexpr H2 __habs2(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, __habs), a); }                                    \
  constexpr H2 __hadd2_sat(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hadd_sat), a, b); }                   \
  constexpr H2 __hsub2_sat(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hsub_sat), a, b); }                   \
  constexpr H2 __hmul2_sat(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hmul_sat), a, b); }                   \
  inline H2 __hfma2_sat(H2 a, H2 b, H2 c) { return cusim::values::lanes(CUDA_CPU_L3(H, __hfma_sat), a, b, c); }             \
  inline H2 __hfma2_relu(H2 a, H2 b, H2 c) { return cusim::values::lanes(CUDA_CPU_L3(H, __hfma_relu), a, b, c); }           \
  constexpr H2 __hmax2(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hmax), a, b); }                           \
  constexpr H2 __hmin2(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hmin), a, b); }                           \
  constexpr H2 __hmax2_nan(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hmax_nan), a, b); }                   \
  constexpr H2 __hmin2_nan(H2 a, H2 b) { return cusim::values::lanes(CUDA_CPU_L2(H, __hmin_nan), a, b); }                   \
  constexpr H2 __hisnan2(H2 a) { return cusim::values::cmp2([](H x, H) { return __hisnan(x); }, a, a); }    \
  CUDA_CPU_FP16_CMP2(H, H2, eq)                                                                             \
  CUDA_CPU_FP16_CMP2(H, H2, ne)                                                                             \
  CUDA_CPU_FP16_CMP2(H, H2, lt)                                                                             \
  CUDA_CPU_FP16_CMP2(H, H2, le)                                                                             \
  CUDA_CPU_FP16_CMP2(H, H2, gt)                                                                             \
  CUDA_CPU_FP16_CMP2(H, H2, ge)                                                                             \
  CUDA_CPU_FP16_CMP2(H, H2, equ)                                                                            \
  CUDA_CPU_FP16_CMP2(H, H2, neu)                                                                            \
  CUDA_CPU_FP16_CMP2(H, H2, ltu)                                                                            \
  CUDA_CPU_FP16_CMP2(H, H2, leu)                                                                            \
  CUDA_CPU_FP16_CMP2(H, H2, gtu)                                                                            \
  CUDA_CPU_FP16_CMP2(H, H2, geu)                                                                            \
  inline H2 h2sqrt(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hsqrt), a); }                                         \
  inline H2 h2rsqrt(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hrsqrt), a); }                                       \
  inline H2 h2rcp(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hrcp), a); }                                           \
  inline H2 h2exp(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hexp), a); }                                           \
  inline H2 h2exp2(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hexp2), a); }                                         \
  inline H2 h2exp10(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hexp10), a); }                                       \
  inline H2 h2log(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hlog), a); }                                           \
  inline H2 h2log2(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hlog2), a); }                                         \
  inline H2 h2log10(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hlog10), a); }                                       \
  inline H2 h2sin(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hsin), a); }                                           \
  inline H2 h2cos(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hcos), a); }                                           \
  inline H2 h2tanh(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, htanh), a); }                                         \
  inline H2 h2tanh_approx(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, htanh), a); }                                  \
  inline H2 h2floor(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hfloor), a); }                                       \
  inline H2 h2ceil(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hceil), a); }                                         \
  inline H2 h2trunc(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, htrunc), a); }                                       \
  inline H2 h2rint(H2 a) { return cusim::values::lanes(CUDA_CPU_L1(H, hrint), a); }                                         \
  constexpr H2 __lowhigh2highlow(H2 a) { return H2(a.y, a.x); }                                             \
  constexpr float __low2float(H2 a) { return float(a.x); }                                                  \
  constexpr float __high2float(H2 a) { return float(a.y); }                                                 \
                                                                                                            \
  constexpr H operator+(const H& a, const H& b) { return __hadd(a, b); }                                    \
  constexpr H operator-(const H& a, const H& b) { return __hsub(a, b); }                                    \
  constexpr H operator*(const H& a, const H& b) { return __hmul(a, b); }                                    \
  constexpr H operator/(const H& a, const H& b) { return __hdiv(a, b); }                                    \
  constexpr H& operator+=(H& a, const H& b) { return a = __hadd(a, b); }                                    \
  constexpr H& operator-=(H& a, const H& b) { return a = __hsub(a, b); }                                    \
  constexpr H& operator*=(H& a, const H& b) { return a = __hmul(a, b); }                                    \
  constexpr H& operator/=(H& a, const H& b) { return a = __hdiv(a, b); }                                    \
  constexpr H& operator++(H& a) { return a = __hadd(a, cusim::values::one16<H>()); }                       \
  constexpr H& operator--(H& a) { return a = __hsub(a, cusim::values::one16<H>()); }                       \
  constexpr H operator++(H& a, int) {                                                                       \
    const H old = a;                                                                                        \
    ++a;                                                                                                    \
    return old;                                                                                             \
  }                                                                                                         \
  constexpr H operator--(H& a, int) {                                                                       \
    const H old = a;                                                                                        \
    --a;                                                                                                    \
    return old;                                                                                             \
  }                                                                                                         \
  constexpr H operator+(const H& a) { return a; }                                                           \
  constexpr H operator-(const H& a) { return __hneg(a); }                                                   \
  constexpr bool operator==(const H& a, const H& b) { return __heq(a, b); }                                 \
  constexpr bool operator!=(const H& a, const H& b) { return __hneu(a, b); }                                \
  constexpr bool operator<(const H& a, const H& b) { return __hlt(a, b); }                                  \
  constexpr bool operator<=(const H& a, const H& b) { return __hle(a, b); }                                 \
  constexpr bool operator>(const H& a, const H& b) { return __hgt(a, b); }                                  \
  constexpr bool operator>=(const H& a, const H& b) { return __hge(a, b); }                                 \
                                                                                                            \
  constexpr H2 operator+(const H2& a, const H2& b) { return __hadd2(a, b); }                                \
  constexpr H2 operator-(const H2& a, const H2& b) { return __hsub2(a, b); }                                \
  constexpr H2 operator*(const H2& a, const H2& b) { return __hmul2(a, b); }                                \
  constexpr H2 operator/(const H2& a, const H2& b) { return __h2div(a, b); }                                \
  constexpr H2& operator+=(H2& a, const H2& b) { return a = __hadd2(a, b); }                                \
  constexpr H2& operator-=(H2& a, const H2& b) { return a = __hsub2(a, b); }                                \
  constexpr H2& operator*=(H2& a, const H2& b) { return a = __hmul2(a, b); }                                \
  constexpr H2& operator/=(H2& a, const H2& b) { return a = __h2div(a, b); }                                \
  constexpr H2& operator++(H2& a) { return a = __hadd2(a, H2(cusim::values::one16<H>(), cusim::values::one16<H>())); } \
  constexpr H2& operator--(H2& a) { return a = __hsub2(a, H2(cusim::values::one16<H>(), cusim::values::one16<H>())); } \
  constexpr H2 operator++(H2& a, int) {                                                                     \
    const H2 old = a;                                                                                       \
    ++a;                                                                                                    \
    return old;                                                                                             \
  }                                                                                                         \
  constexpr H2 operator--(H2& a, int) {                                                                     \
    const H2 old = a;                                                                                       \
    --a;                                                                                                    \
    return old;                                                                                             \
  }                                                                                                         \
  constexpr H2 operator+(const H2& a) { return a; }                                                         \
  constexpr H2 operator-(const H2& a) { return __hneg2(a); }                                                \
  constexpr bool operator==(const H2& a, const H2& b) { return __hbeq2(a, b); }                             \
  constexpr bool operator!=(const H2& a, const H2& b) { return __hbneu2(a, b); }                            \
  constexpr bool operator<(const H2& a, const H2& b) { return __hblt2(a, b); }                              \
  constexpr bool operator<=(const H2& a, const H2& b) { return __hble2(a, b); }                             \
  constexpr bool operator>(const H2& a, const H2& b) { return __hbgt2(a, b); }                              \
  constexpr bool operator>=(const H2& a, const H2& b) { return __hbge2(a, b); }

// Lane functions for cusim::values::lanes (an overloaded name cannot be passed as it is).
#define CUDA_CPU_L1(H, f) [](H p) { return f(p); }
#define CUDA_CPU_L2(H, f) [](H p, H q) { return f(p, q); }
#define CUDA_CPU_L3(H, f) [](H p, H q, H r) { return f(p, q, r); }

// __heq2 (1.0 or 0.0 per lane), __heq2_mask (0xffff per lane), __hbeq2 (both lanes), and so on.
#define CUDA_CPU_FP16_CMP2(H, H2, op)                                                                  \
  constexpr H2 __h##op##2(H2 a, H2 b) { return cusim::values::cmp2(CUDA_CPU_L2(H, __h##op), a, b); }                  \
  constexpr unsigned __h##op##2_mask(H2 a, H2 b) { return cusim::values::cmp2_mask(CUDA_CPU_L2(H, __h##op), a, b); }  \
  constexpr bool __hb##op##2(H2 a, H2 b) { return __h##op(a.x, b.x) && __h##op(a.y, b.y); }

CUDA_CPU_FP16_COMMON(__half, __half2)

// ---------------------------------------------------------------- conversions
constexpr __half __float2half(float f) { return __half(f); }
constexpr __half __float2half_rn(float f) { return __half(f); }
inline __half __float2half_rz(float f) { return __half_raw{cusim::values::half_bits_rounded<cusim::values::rnd::rz>(f)}; }
inline __half __float2half_rd(float f) { return __half_raw{cusim::values::half_bits_rounded<cusim::values::rnd::rd>(f)}; }
inline __half __float2half_ru(float f) { return __half_raw{cusim::values::half_bits_rounded<cusim::values::rnd::ru>(f)}; }
constexpr __half __double2half(double d) { return __half(d); }
constexpr float __half2float(__half h) { return float(h); }
constexpr __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
constexpr __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
constexpr __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
constexpr float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }

// Half to integer: saturated, NaN to 0 (0x8000000000000000 for the 64-bit ones).
#define CUDA_CPU_HALF2INT(name, I, suffix, M) \
  inline I __half2##name##_##suffix(__half h) { return cusim::values::to_int<I, cusim::values::rnd::M>(float(h)); }
#define CUDA_CPU_INT2HALF(name, I, suffix, M)                                         \
  inline __half __##name##2half_##suffix(I i) {                                       \
    return __half_raw{cusim::values::half_bits_from_int<cusim::values::rnd::M>(i)};   \
  }
#define CUDA_CPU_HALF_INT(name, I)          \
  CUDA_CPU_HALF2INT(name, I, rn, rn)        \
  CUDA_CPU_HALF2INT(name, I, rz, rz)        \
  CUDA_CPU_HALF2INT(name, I, rd, rd)        \
  CUDA_CPU_HALF2INT(name, I, ru, ru)        \
  CUDA_CPU_INT2HALF(name, I, rn, rn)        \
  CUDA_CPU_INT2HALF(name, I, rz, rz)        \
  CUDA_CPU_INT2HALF(name, I, rd, rd)        \
  CUDA_CPU_INT2HALF(name, I, ru, ru)
CUDA_CPU_HALF_INT(short, short)
CUDA_CPU_HALF_INT(ushort, unsigned short)
CUDA_CPU_HALF_INT(int, int)
CUDA_CPU_HALF_INT(uint, unsigned int)
CUDA_CPU_HALF_INT(ll, long long)
CUDA_CPU_HALF_INT(ull, unsigned long long)
CUDA_CPU_HALF2INT(char, signed char, rz, rz)
CUDA_CPU_HALF2INT(uchar, unsigned char, rz, rz)
#undef CUDA_CPU_HALF_INT
#undef CUDA_CPU_INT2HALF
#undef CUDA_CPU_HALF2INT

constexpr short __half_as_short(__half h) { return __builtin_bit_cast(short, h); }
constexpr unsigned short __half_as_ushort(__half h) { return __builtin_bit_cast(unsigned short, h); }
constexpr __half __short_as_half(short i) { return __builtin_bit_cast(__half, i); }
constexpr __half __ushort_as_half(unsigned short i) { return __builtin_bit_cast(__half, i); }

// ---------------------------------------------------------------- pairs
constexpr __half2 make_half2(__half x, __half y) { return __half2(x, y); }
constexpr __half2 __halves2half2(__half lo, __half hi) { return __half2(lo, hi); }
constexpr __half2 __half2half2(__half a) { return __half2(a, a); }
constexpr __half __low2half(__half2 a) { return a.x; }
constexpr __half __high2half(__half2 a) { return a.y; }
constexpr __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
constexpr __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
constexpr __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
constexpr __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }

// ---------------------------------------------------------------- constants (CUDA 12)
#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)
