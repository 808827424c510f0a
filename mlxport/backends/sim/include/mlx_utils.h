// What MLX prepends to every custom Metal kernel (mlx/backend/metal/kernels/utils.h and the
// headers it pulls in: bf16.h, bf16_math.h, complex.h, defines.h, logging.h), for the simulator.
//
// Shape and stride parameters are templates over anything indexable, so the runtime's checked
// pointer objects can be passed where MLX has `constant const int*` / `constant const int64_t*`.
// The 64-bit/bool/complex simd_shuffle* overloads of MLX's utils.h belong with the SIMD-group
// functions (msl_runtime.h).
#pragma once

#include "msl_math.h"

#ifndef METAL_FUNC
#define METAL_FUNC inline
#endif
// Unroll hints are performance only; a failed "unroll(full)" would warn on every kernel.
#define MLX_MTL_PRAGMA_UNROLL

using namespace metal;

typedef half float16_t;
typedef bfloat bfloat16_t;

inline uint16_t bfloat16_to_uint16(const bfloat16_t x) { return x.bits_; }
inline bfloat16_t uint16_to_bfloat16(const uint16_t x) { return bfloat16_t::from_bits(x); }

static constexpr int MAX_REDUCE_SPECIALIZED_DIMS = 4;
static constexpr int REDUCE_N_READS = 4;
static constexpr int REDUCE_N_WRITES = 4;
static constexpr int SOFTMAX_N_READS = 4;
static constexpr int RMS_N_READS = 4;
static constexpr int RMS_LOOPED_LIMIT = 4096;

namespace mlx {
struct os_log {
  constexpr os_log(const char*, const char*) {}
  template <typename... Args>
  void log_debug(const char*, Args...) const {}
};
}  // namespace mlx

// ---------------------------------------------------------------------------------------------
// complex64_t
template <typename T>
struct complex_t;
template <typename T>
inline constexpr bool is_complex_v = false;
template <typename T>
inline constexpr bool is_complex_v<complex_t<T>> = true;

template <typename T>
struct complex_t {
  using value_type = T;
  T real;
  T imag;

  constexpr complex_t(T real, T imag) : real(real), imag(imag) {}
  constexpr complex_t() : real(0), imag(0) {}
  template <typename U>
    requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
  constexpr complex_t(U x) : real(static_cast<T>(x)), imag(static_cast<T>(0)) {}
  template <typename U>
    requires(!std::is_same_v<U, T>)
  constexpr complex_t(complex_t<U> x) : real(static_cast<T>(x.real)), imag(static_cast<T>(x.imag)) {}
  constexpr complex_t(vec<T, 2> v) : real(v.x), imag(v.y) {}
  constexpr operator vec<T, 2>() const { return vec<T, 2>(real, imag); }
  template <typename U>
    requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
  constexpr explicit operator U() const {
    return static_cast<U>(real);
  }
};

using complex32_t = complex_t<half>;
using complex64_t = complex_t<float>;

template <typename T>
constexpr complex_t<T> operator-(complex_t<T> x) {
  return {-x.real, -x.imag};
}
template <typename T>
constexpr bool operator>=(complex_t<T> a, complex_t<T> b) {
  return (a.real > b.real) || (a.real == b.real && a.imag >= b.imag);
}
template <typename T>
constexpr bool operator>(complex_t<T> a, complex_t<T> b) {
  return (a.real > b.real) || (a.real == b.real && a.imag > b.imag);
}
template <typename T>
constexpr bool operator<=(complex_t<T> a, complex_t<T> b) {
  return b >= a;
}
template <typename T>
constexpr bool operator<(complex_t<T> a, complex_t<T> b) {
  return b > a;
}
template <typename T>
constexpr bool operator==(complex_t<T> a, complex_t<T> b) {
  return a.real == b.real && a.imag == b.imag;
}
template <typename T>
constexpr complex_t<T> operator+(complex_t<T> a, complex_t<T> b) {
  return {a.real + b.real, a.imag + b.imag};
}
template <typename T>
constexpr complex_t<T>& operator+=(complex_t<T>& a, complex_t<T> b) {
  a.real += b.real;
  a.imag += b.imag;
  return a;
}
template <typename T, typename U>
  requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
constexpr complex_t<T> operator+(U a, complex_t<T> b) {
  return {static_cast<T>(a) + b.real, b.imag};
}
template <typename T, typename U>
  requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
constexpr complex_t<T> operator+(complex_t<T> a, U b) {
  return {a.real + static_cast<T>(b), a.imag};
}
template <typename T>
constexpr complex_t<T> operator-(complex_t<T> a, complex_t<T> b) {
  return {a.real - b.real, a.imag - b.imag};
}
template <typename T, typename U>
  requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
constexpr complex_t<T> operator-(U a, complex_t<T> b) {
  return {static_cast<T>(a) - b.real, -b.imag};
}
template <typename T, typename U>
  requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
constexpr complex_t<T> operator-(complex_t<T> a, U b) {
  return {a.real - static_cast<T>(b), a.imag};
}
template <typename T>
constexpr complex_t<T> operator*(complex_t<T> a, complex_t<T> b) {
  return {a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real};
}
template <typename T>
constexpr complex_t<T> operator/(complex_t<T> a, complex_t<T> b) {
  auto denom = b.real * b.real + b.imag * b.imag;
  auto x = a.real * b.real + a.imag * b.imag;
  auto y = a.imag * b.real - a.real * b.imag;
  return {x / denom, y / denom};
}
template <typename T, typename U>
  requires(!is_complex_v<U> && metal::is_arithmetic_v<U>)
constexpr complex_t<T> operator/(U a, complex_t<T> b) {
  auto scalar = static_cast<T>(a);
  auto denom = b.real * b.real + b.imag * b.imag;
  return {scalar * b.real / denom, -scalar * b.imag / denom};
}
template <typename T>
constexpr complex_t<T> operator%(complex_t<T> a, complex_t<T> b) {
  auto real = a.real - (b.real * static_cast<int64_t>(a.real / b.real));
  auto imag = a.imag - (b.imag * static_cast<int64_t>(a.imag / b.imag));
  if (real != 0 && ((real < 0) != (b.real < 0))) real += b.real;
  if (imag != 0 && ((imag < 0) != (b.imag < 0))) imag += b.imag;
  return {real, imag};
}

// ---------------------------------------------------------------------------------------------
// Limits
template <typename U>
struct WorkPerThread {
  static_assert(sizeof(U) <= 8, "Type too large");
  static constexpr int n = 8 / sizeof(U);
};

template <typename U>
struct Limits {
  static constexpr U max = metal::numeric_limits<U>::max();
  static constexpr U min = metal::numeric_limits<U>::min();
  static constexpr U finite_max = metal::numeric_limits<U>::max();
  static constexpr U finite_min = metal::numeric_limits<U>::min();
};

#define MLX_SIM_FLOAT_LIMIT(type)                                        \
  template <>                                                            \
  struct Limits<type> {                                                  \
    static constexpr type max = metal::numeric_limits<type>::infinity(); \
    static constexpr type min = -metal::numeric_limits<type>::infinity(); \
    static constexpr type finite_max = metal::numeric_limits<type>::max(); \
    static constexpr type finite_min = -metal::numeric_limits<type>::max(); \
  };
MLX_SIM_FLOAT_LIMIT(half)
MLX_SIM_FLOAT_LIMIT(float)
MLX_SIM_FLOAT_LIMIT(bfloat16_t)
#undef MLX_SIM_FLOAT_LIMIT

template <>
struct Limits<bool> {
  static constexpr bool max = true;
  static constexpr bool min = false;
};

template <typename T>
struct Limits<complex_t<T>> {
  static constexpr complex_t<T> max =
      complex_t<T>(metal::numeric_limits<T>::infinity(), metal::numeric_limits<T>::infinity());
  static constexpr complex_t<T> min =
      complex_t<T>(-metal::numeric_limits<T>::infinity(), -metal::numeric_limits<T>::infinity());
};

// ---------------------------------------------------------------------------------------------
// Indexing. IdxT follows the type of `elem`, as in MLX (a uint elem gives uint arithmetic).
template <typename IdxT = int64_t, typename Shape, typename Strides>
  requires std::is_integral_v<IdxT>
METAL_FUNC IdxT elem_to_loc(IdxT elem, const Shape& shape, const Strides& strides, int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}

template <typename IdxT = int64_t, typename Shape, typename Strides>
METAL_FUNC IdxT elem_to_loc(uint3 elem, const Shape& shape, const Strides& strides, int ndim) {
  IdxT loc = elem.x * IdxT(strides[ndim - 1]) + elem.y * IdxT(strides[ndim - 2]);
  for (int d = ndim - 3; d >= 0; --d) {
    loc += (elem.z % shape[d]) * IdxT(strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}

template <typename IdxT = int64_t, typename Stride>
METAL_FUNC IdxT elem_to_loc_1(uint elem, const Stride& stride) {
  return elem * IdxT(stride);
}

template <typename IdxT = int64_t, typename Strides>
METAL_FUNC IdxT elem_to_loc_2(uint2 elem, const Strides& strides) {
  return elem.x * IdxT(strides[1]) + elem.y * IdxT(strides[0]);
}

template <typename IdxT = int64_t, typename Strides>
METAL_FUNC IdxT elem_to_loc_3(uint3 elem, const Strides& strides) {
  return elem.x * IdxT(strides[2]) + elem.y * IdxT(strides[1]) + elem.z * IdxT(strides[0]);
}

template <typename IdxT = int64_t, typename Shape, typename Strides>
METAL_FUNC vec<IdxT, 2> elem_to_loc_2_nd(uint3 elem, const Shape& shape, const Strides& a_strides,
                                        const Strides& b_strides, int ndim) {
  vec<IdxT, 2> loc = {
      IdxT(elem.x * IdxT(a_strides[ndim - 1]) + IdxT(elem.y) * IdxT(a_strides[ndim - 2])),
      IdxT(elem.x * IdxT(b_strides[ndim - 1]) + elem.y * IdxT(b_strides[ndim - 2]))};
  for (int d = ndim - 3; d >= 0; --d) {
    uint l = elem.z % shape[d];
    loc.x += l * IdxT(a_strides[d]);
    loc.y += l * IdxT(b_strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}

template <typename IdxT = int64_t, typename Shape, typename Strides>
METAL_FUNC vec<IdxT, 3> elem_to_loc_3_nd(uint3 elem, const Shape& shape, const Strides& a_strides,
                                        const Strides& b_strides, const Strides& c_strides, int ndim) {
  vec<IdxT, 3> loc = {
      IdxT(elem.x * IdxT(a_strides[ndim - 1])) + IdxT(elem.y * IdxT(a_strides[ndim - 2])),
      IdxT(elem.x * IdxT(b_strides[ndim - 1])) + IdxT(elem.y * IdxT(b_strides[ndim - 2])),
      IdxT(elem.x * IdxT(c_strides[ndim - 1])) + IdxT(elem.y * IdxT(c_strides[ndim - 2]))};
  for (int d = ndim - 3; d >= 0; --d) {
    uint l = elem.z % shape[d];
    loc.x += l * IdxT(a_strides[d]);
    loc.y += l * IdxT(b_strides[d]);
    loc.z += l * IdxT(c_strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}

template <int DIM, typename OffsetT = size_t, bool General = true>
struct LoopedElemToLoc {
  int dim;
  LoopedElemToLoc<DIM - 1, OffsetT, General> inner_looper;
  OffsetT offset{0};
  int index{0};

  LoopedElemToLoc(int dim) : dim(dim), inner_looper(dim - 1) {}

  template <typename Shape, typename Strides>
  void next(const Shape& shape, const Strides& strides) {
    if (dim == 0) return;
    index++;
    offset += OffsetT(strides[dim - 1]);
    if (index >= shape[dim - 1]) {
      index = 0;
      inner_looper.next(shape, strides);
      offset = inner_looper.offset;
    }
  }

  template <typename Shape, typename Strides>
  void next(int n, const Shape& shape, const Strides& strides) {
    if (dim == 0) return;
    index += n;
    offset += n * OffsetT(strides[dim - 1]);
    if (index >= shape[dim - 1]) {
      int extra = index - shape[dim - 1];
      if (extra >= shape[dim - 1]) {
        inner_looper.next(1 + extra / shape[dim - 1], shape, strides);
        extra = extra % shape[dim - 1];
      } else {
        inner_looper.next(shape, strides);
      }
      index = 0;
      offset = inner_looper.offset;
      if (extra > 0) next(extra, shape, strides);
    }
  }

  OffsetT location() { return offset; }
};

template <typename OffsetT>
struct LoopedElemToLoc<1, OffsetT, true> {
  int dim;
  OffsetT offset{0};
  uint index{0};

  LoopedElemToLoc(int dim) : dim(dim) {}

  template <typename Shape, typename Strides>
  void next(const Shape& shape, const Strides& strides) {
    index++;
    if (dim > 1) offset = elem_to_loc<OffsetT>(index, shape, strides, dim);
    else offset += OffsetT(strides[0]);
  }

  template <typename Shape, typename Strides>
  void next(int n, const Shape& shape, const Strides& strides) {
    index += n;
    if (dim > 1) offset = elem_to_loc<OffsetT>(index, shape, strides, dim);
    else offset = index * OffsetT(strides[0]);
  }

  OffsetT location() { return offset; }
};

template <typename OffsetT>
struct LoopedElemToLoc<1, OffsetT, false> {
  OffsetT offset{0};

  LoopedElemToLoc(int) {}

  template <typename Shape, typename Strides>
  void next(const Shape&, const Strides& strides) {
    offset += OffsetT(strides[0]);
  }

  template <typename Shape, typename Strides>
  void next(int n, const Shape&, const Strides& strides) {
    offset += n * OffsetT(strides[0]);
  }

  OffsetT location() { return offset; }
};

// ---------------------------------------------------------------------------------------------
// Calculation and casting utils
template <typename T, typename U>
inline T ceildiv(T N, U M) {
  return (N + M - 1) / M;
}

inline float log1p(float x) {
  float xp1 = 1.0f + x;
  if (xp1 == Limits<float>::max) return Limits<float>::max;
  if (xp1 == 1.0f) return x;
  return x * (metal::log(xp1) / (xp1 - 1.0f));
}

inline bfloat16_t log1p(bfloat16_t x) {
  float xp1 = 1.0f + static_cast<float>(x);
  if (xp1 == Limits<float>::max) return Limits<bfloat16_t>::max;
  if (xp1 == 1.0f) return x;
  return bfloat16_t(x * (metal::log(xp1) / (xp1 - 1.0f)));
}

inline complex64_t log1p(complex64_t in) {
  float x = in.real;
  float y = in.imag;
  float zabs = metal::precise::sqrt(x * x + y * y);
  float theta = metal::atan2(y, x + 1);
  if (zabs < 0.5f) {
    float r = x * (2 + x) + y * y;
    if (r == 0) return {x, theta};
    return {0.5f * log1p(r), theta};
  }
  auto z0 = metal::sqrt((x + 1) * (x + 1) + y * y);
  return {metal::log(z0), theta};
}

template <bool condition, typename T, typename U>
struct ConditionalType {
  using type = U;
};
template <typename T, typename U>
struct ConditionalType<true, T, U> {
  using type = T;
};

template <typename U, typename T>
inline U cast_to(T val) {
  return static_cast<U>(val);
}
template <>
inline bool cast_to<bool, float>(float val) {
  return (as_type<uint32_t>(val) & 0x7FFFFFFF) != 0;
}
template <>
inline bool cast_to<bool, bfloat16_t>(bfloat16_t val) {
  return (as_type<uint16_t>(val) & 0x7FFF) != 0;
}
template <>
inline bool cast_to<bool, complex64_t>(complex64_t val) {
  return cast_to<bool, float>(val.real) || cast_to<bool, float>(val.imag);
}
