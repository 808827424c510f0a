// CUDA's bfloat16 (cuda_bf16.h) for device code on mlxport's CPU executor (C++20, clang):
// __nv_bfloat16 and __nv_bfloat162 (alias nv_bfloat16, nv_bfloat162), their operators and the
// intrinsics, as for __half (cuda_fp16.h, which this includes): the same implicit conversions and
// the same ambiguity of b * 2.0f. Arithmetic is computed in float and rounded to nearest even
// once (exact, float having more than twice bfloat16's precision); __hfma rounds the exact
// a * b + c once; a NaN result is the canonical 0x7fff.
#pragma once

#include "cuda_fp16.h"

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct alignas(4) __nv_bfloat162_raw {
  unsigned short x, y;
};

namespace cusim::values {
constexpr unsigned short bf16_bits(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return kNaN16;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}
// From double in one rounding: to float rounding to odd first, which then rounds to nearest even right.
constexpr unsigned short bf16_bits(double d) {
  const float f = float(d);
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if (double(f) != d && d == d && !(u & 1u)) u = __builtin_fabs(d) > __builtin_fabs(double(f)) ? u + 1 : u - 1;
  return bf16_bits(__builtin_bit_cast(float, u));
}
constexpr float bf16_value(unsigned short b) { return __builtin_bit_cast(float, uint32_t(b) << 16); }
template <rnd M>
inline unsigned short bf16_bits_rounded(double v, int tail = 0) {
  return bf16_bits(float(round_to_format<8, -126, 127>(v, tail, M)));  // exact in bfloat16 by then
}
template <rnd M, class I>
inline unsigned short bf16_bits_from_int(I i) {
  int tail = 0;
  const double d = sizeof(I) == 8 ? int_to_double(i, tail) : double(i);
  return bf16_bits_rounded<M>(d, tail);
}
}  // namespace cusim::values

// ---------------------------------------------------------------- __nv_bfloat16, __nv_bfloat162
struct alignas(2) __nv_bfloat16 {
 protected:
  unsigned short __x;

 public:
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  constexpr __nv_bfloat16(float f) : __x(cusim::values::bf16_bits(f)) {}
  constexpr __nv_bfloat16(double d) : __x(cusim::values::bf16_bits(d)) {}
  constexpr __nv_bfloat16(short i) : __x(cusim::values::bf16_bits(double(i))) {}
  constexpr __nv_bfloat16(unsigned short i) : __x(cusim::values::bf16_bits(double(i))) {}
  constexpr __nv_bfloat16(int i) : __x(cusim::values::bf16_bits(double(i))) {}
  constexpr __nv_bfloat16(unsigned int i) : __x(cusim::values::bf16_bits(double(i))) {}
  // A 64-bit integer is not exact in double: rounded with what double lacks of it, once.
  __nv_bfloat16(long i) : __x(cusim::values::bf16_bits_from_int<cusim::values::rnd::rn>(i)) {}
  __nv_bfloat16(unsigned long i) : __x(cusim::values::bf16_bits_from_int<cusim::values::rnd::rn>(i)) {}
  __nv_bfloat16(long long i) : __x(cusim::values::bf16_bits_from_int<cusim::values::rnd::rn>(i)) {}
  __nv_bfloat16(unsigned long long i) : __x(cusim::values::bf16_bits_from_int<cusim::values::rnd::rn>(i)) {}
  explicit constexpr __nv_bfloat16(__half h) : __x(cusim::values::bf16_bits(float(h))) {}

  __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) {
    __x = r.x;
    return *this;
  }
  volatile __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) volatile {
    __x = r.x;
    return *this;
  }
  constexpr operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
  operator __nv_bfloat16_raw() const volatile { return __nv_bfloat16_raw{__x}; }

  constexpr operator float() const { return cusim::values::bf16_value(__x); }
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

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;

  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  constexpr __nv_bfloat162(const __nv_bfloat162_raw& r) : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
  __nv_bfloat162& operator=(const __nv_bfloat162_raw& r) {
    x = __nv_bfloat16_raw{r.x};
    y = __nv_bfloat16_raw{r.y};
    return *this;
  }
  constexpr operator __nv_bfloat162_raw() const {
    return __nv_bfloat162_raw{__nv_bfloat16_raw(x).x, __nv_bfloat16_raw(y).x};
  }
};

using nv_bfloat16 = __nv_bfloat16;
using nv_bfloat162 = __nv_bfloat162;

static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2);
static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4);
static_assert(std::is_trivially_copyable_v<__nv_bfloat16> && std::is_trivially_copyable_v<__nv_bfloat162>);

// __half from bfloat16 rounds once: the bfloat16 value is exact in float.
inline __half::__half(__nv_bfloat16 b) : __x(cusim::values::half_bits(float(b))) {}

template <>
struct cusim::values::fp16_format<__nv_bfloat16> {
  static constexpr int P = 8, EMIN = -126, EMAX = 127;
  static constexpr unsigned short kInf = 0x7f80, kOne = 0x3f80;
  static constexpr float value(unsigned short b) { return bf16_value(b); }
  static constexpr unsigned short bits(float f) { return bf16_bits(f); }
};

CUDA_CPU_FP16_COMMON(__nv_bfloat16, __nv_bfloat162)

// ---------------------------------------------------------------- conversions
constexpr __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
constexpr __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
  return __nv_bfloat16_raw{cusim::values::bf16_bits_rounded<cusim::values::rnd::rz>(f)};
}
inline __nv_bfloat16 __float2bfloat16_rd(float f) {
  return __nv_bfloat16_raw{cusim::values::bf16_bits_rounded<cusim::values::rnd::rd>(f)};
}
inline __nv_bfloat16 __float2bfloat16_ru(float f) {
  return __nv_bfloat16_raw{cusim::values::bf16_bits_rounded<cusim::values::rnd::ru>(f)};
}
constexpr __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
constexpr float __bfloat162float(__nv_bfloat16 b) { return float(b); }
constexpr __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162(__nv_bfloat16(f), __nv_bfloat16(f)); }
constexpr __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
constexpr __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __nv_bfloat162(__nv_bfloat16(f.x), __nv_bfloat16(f.y)); }
constexpr float2 __bfloat1622float2(__nv_bfloat162 b) { return float2{float(b.x), float(b.y)}; }

#define CUDA_CPU_BF2INT(name, I, suffix, M)                                   \
  inline I __bfloat162##name##_##suffix(__nv_bfloat16 b) {                    \
    return cusim::values::to_int<I, cusim::values::rnd::M>(float(b));         \
  }
#define CUDA_CPU_INT2BF(name, I, suffix, M)                                        \
  inline __nv_bfloat16 __##name##2bfloat16_##suffix(I i) {                         \
    return __nv_bfloat16_raw{cusim::values::bf16_bits_from_int<cusim::values::rnd::M>(i)}; \
  }
#define CUDA_CPU_BF_INT(name, I)          \
  CUDA_CPU_BF2INT(name, I, rn, rn)        \
  CUDA_CPU_BF2INT(name, I, rz, rz)        \
  CUDA_CPU_BF2INT(name, I, rd, rd)        \
  CUDA_CPU_BF2INT(name, I, ru, ru)        \
  CUDA_CPU_INT2BF(name, I, rn, rn)        \
  CUDA_CPU_INT2BF(name, I, rz, rz)        \
  CUDA_CPU_INT2BF(name, I, rd, rd)        \
  CUDA_CPU_INT2BF(name, I, ru, ru)
CUDA_CPU_BF_INT(short, short)
CUDA_CPU_BF_INT(ushort, unsigned short)
CUDA_CPU_BF_INT(int, int)
CUDA_CPU_BF_INT(uint, unsigned int)
CUDA_CPU_BF_INT(ll, long long)
CUDA_CPU_BF_INT(ull, unsigned long long)
CUDA_CPU_BF2INT(char, signed char, rz, rz)
CUDA_CPU_BF2INT(uchar, unsigned char, rz, rz)
#undef CUDA_CPU_BF_INT
#undef CUDA_CPU_INT2BF
#undef CUDA_CPU_BF2INT

constexpr short __bfloat16_as_short(__nv_bfloat16 b) { return __builtin_bit_cast(short, b); }
constexpr unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return __builtin_bit_cast(unsigned short, b); }
constexpr __nv_bfloat16 __short_as_bfloat16(short i) { return __builtin_bit_cast(__nv_bfloat16, i); }
constexpr __nv_bfloat16 __ushort_as_bfloat16(unsigned short i) { return __builtin_bit_cast(__nv_bfloat16, i); }

// ---------------------------------------------------------------- pairs
constexpr __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) { return __nv_bfloat162(x, y); }
constexpr __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162(lo, hi); }
constexpr __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
constexpr __nv_bfloat16 __low2bfloat16(__nv_bfloat162 a) { return a.x; }
constexpr __nv_bfloat16 __high2bfloat16(__nv_bfloat162 a) { return a.y; }
constexpr __nv_bfloat162 __low2bfloat162(__nv_bfloat162 a) { return __nv_bfloat162(a.x, a.x); }
constexpr __nv_bfloat162 __high2bfloat162(__nv_bfloat162 a) { return __nv_bfloat162(a.y, a.y); }
constexpr __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x, b.x); }
constexpr __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.y, b.y); }

// ---------------------------------------------------------------- constants (CUDA 12)
#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
