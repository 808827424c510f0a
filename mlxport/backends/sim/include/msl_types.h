// MSL scalar and vector types for the Metal simulator (C++20, clang).
//
// half is clang's _Float16. MSL rounds every half operation to half; clang only does so with
// `-Xclang -ffloat16-excess-precision=none` (otherwise a+b+c is evaluated in float and rounded
// once). Compile kernels with that flag; msl_sim_half_rounds_per_op() checks it at run time.
// MSL char is signed: on aarch64 hosts also pass -fsigned-char.
//
// Do not include <cmath>/<math.h> in the same translation unit: their global overloads make
// calls such as pow(x, 2) ambiguous with metal:: math under `using namespace metal`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "mlxsim_core.h"  // is_checked_pointer

using half = _Float16;
using uchar = unsigned char;
using ushort = unsigned short;
using uint = unsigned int;
using ulong = unsigned long;
using std::size_t;
using std::ptrdiff_t;
using std::int8_t;
using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::uint8_t;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;

static_assert(sizeof(long) == 8, "MSL long is 64-bit");

// ---------------------------------------------------------------------------------------------
// bfloat: bfloat16 storage, float arithmetic, round-to-nearest-even back after every operation.
// MSL forbids implicit float->bfloat conversion on older compilers; the simulator accepts it
// unless MLXPORT_SIM_STRICT_BFLOAT is defined to 1.
#ifndef MLXPORT_SIM_STRICT_BFLOAT
#define MLXPORT_SIM_STRICT_BFLOAT 0
#endif

struct bfloat;

namespace metal::sim_detail {
template <class T>
inline constexpr bool is_half_v = std::is_same_v<std::remove_cv_t<T>, half>;
template <class T>
inline constexpr bool is_bfloat_v = std::is_same_v<std::remove_cv_t<T>, bfloat>;
// Arithmetic in the MSL sense: the C++ arithmetic types plus half and bfloat.
template <class T>
inline constexpr bool is_arith_v = std::is_arithmetic_v<T> || is_half_v<T> || is_bfloat_v<T>;
template <class T>
inline constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T> || is_bfloat_v<T>;

constexpr uint16_t float_to_bfloat_bits(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // keep NaN quiet
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
constexpr float bfloat_bits_to_float(uint16_t b) {
  return __builtin_bit_cast(float, uint32_t(b) << 16);
}
}  // namespace metal::sim_detail

struct bfloat {
  uint16_t bits_;

  bfloat() = default;
  explicit(MLXPORT_SIM_STRICT_BFLOAT) constexpr bfloat(float f)
      : bits_(metal::sim_detail::float_to_bfloat_bits(f)) {}
  template <class U>
    requires(metal::sim_detail::is_arith_v<U> && !std::is_same_v<U, float> &&
             !std::is_same_v<U, bfloat>)
  explicit(MLXPORT_SIM_STRICT_BFLOAT) constexpr bfloat(U u) : bfloat(float(u)) {}

  constexpr operator float() const { return metal::sim_detail::bfloat_bits_to_float(bits_); }

  static constexpr bfloat from_bits(uint16_t b) {
    bfloat r;
    r.bits_ = b;
    return r;
  }

  constexpr bfloat operator-() const { return from_bits(uint16_t(bits_ ^ 0x8000u)); }
  constexpr bfloat operator+() const { return *this; }
  constexpr bfloat& operator++() { return *this = bfloat(float(*this) + 1.0f); }
  constexpr bfloat& operator--() { return *this = bfloat(float(*this) - 1.0f); }
  constexpr bfloat operator++(int) {
    bfloat t = *this;
    ++*this;
    return t;
  }
  constexpr bfloat operator--(int) {
    bfloat t = *this;
    --*this;
    return t;
  }
};
static_assert(sizeof(bfloat) == 2 && std::is_trivially_copyable_v<bfloat>);

namespace metal::sim_detail {
// bfloat op x: with an integer the result stays bfloat (as half op int stays half); with a
// wider floating type the bfloat is promoted.
template <class U>
using bf_result_t = std::conditional_t<std::is_integral_v<U> || is_bfloat_v<U>, bfloat,
                                       std::conditional_t<std::is_same_v<U, double>, double, float>>;
template <class U>
constexpr auto bf_wide(U u) {
  if constexpr (std::is_same_v<U, double>) return u;
  else return float(u);
}
}  // namespace metal::sim_detail

#define MSL_BF_ARITH(op)                                                                  \
  template <class A, class B>                                                              \
    requires((metal::sim_detail::is_bfloat_v<A> && metal::sim_detail::is_arith_v<B>) ||    \
             (metal::sim_detail::is_bfloat_v<B> && metal::sim_detail::is_arith_v<A>))      \
  constexpr auto operator op(A a, B b) {                                                   \
    using O = std::conditional_t<metal::sim_detail::is_bfloat_v<A>, B, A>;                 \
    using R = metal::sim_detail::bf_result_t<O>;                                           \
    return R(metal::sim_detail::bf_wide(a) op metal::sim_detail::bf_wide(b));              \
  }                                                                                        \
  template <class B>                                                                       \
    requires metal::sim_detail::is_arith_v<B>                                              \
  constexpr bfloat& operator op##=(bfloat & a, B b) {                                      \
    return a = bfloat(a op b);                                                             \
  }
MSL_BF_ARITH(+)
MSL_BF_ARITH(-)
MSL_BF_ARITH(*)
MSL_BF_ARITH(/)
#undef MSL_BF_ARITH

#define MSL_BF_CMP(op)                                                                    \
  template <class A, class B>                                                              \
    requires((metal::sim_detail::is_bfloat_v<A> && metal::sim_detail::is_arith_v<B>) ||    \
             (metal::sim_detail::is_bfloat_v<B> && metal::sim_detail::is_arith_v<A>))      \
  constexpr bool operator op(A a, B b) {                                                   \
    return metal::sim_detail::bf_wide(a) op metal::sim_detail::bf_wide(b);                 \
  }
MSL_BF_CMP(==)
MSL_BF_CMP(!=)
MSL_BF_CMP(<)
MSL_BF_CMP(<=)
MSL_BF_CMP(>)
MSL_BF_CMP(>=)
#undef MSL_BF_CMP

// MSL literal suffixes: 1.5h (half), 1.5bf (bfloat).
#pragma GCC diagnostic push
#ifdef __clang__
#pragma clang diagnostic ignored "-Wuser-defined-literals"
#pragma clang diagnostic ignored "-Wreserved-user-defined-literal"
#else
#pragma GCC diagnostic ignored "-Wliteral-suffix"
#endif
constexpr half operator""h(long double v) { return half(v); }
constexpr half operator""h(unsigned long long v) { return half(v); }
constexpr half operator""H(long double v) { return half(v); }
constexpr bfloat operator""bf(long double v) { return bfloat(float(v)); }
constexpr bfloat operator""bf(unsigned long long v) { return bfloat(float(v)); }
constexpr bfloat operator""BF(long double v) { return bfloat(float(v)); }
#pragma GCC diagnostic pop

// True when half arithmetic rounds after every operation (see the flag at the top).
inline bool msl_sim_half_rounds_per_op() {
  volatile float one = 1.0f, tiny = 0.0004f;
  half a = half(one), b = half(tiny);
  return half(a + b + b) == a;
}

// ---------------------------------------------------------------------------------------------
// Vectors: metal::vec<T, N> (N = 2, 3, 4) and metal::packed_vec<T, N>.
namespace metal {
template <class T, int N>
struct vec;
template <class T, int N>
struct packed_vec;

namespace sim_detail {
template <class T, int N, bool Packed>
struct vec_storage;

template <int... I>
constexpr bool distinct_v = [] {
  constexpr int idx[] = {I...};
  for (int i = 0; i < int(sizeof...(I)); ++i)
    for (int j = i + 1; j < int(sizeof...(I)); ++j)
      if (idx[i] == idx[j]) return false;
  return true;
}();

// A swizzle such as v.zyx: a view of the owning vector's storage. Reads convert to V;
// assignment is only allowed without repeated components, as in MSL.
template <class V, class T, int N, int... I>
struct swz {
  T _v[N];
  static constexpr int size = sizeof...(I);
  static constexpr bool writable = distinct_v<I...>;
  using vec_type = V;

  constexpr V get() const { return V(_v[I]...); }
  constexpr operator V() const { return get(); }
  constexpr T operator[](int i) const {
    constexpr int idx[] = {I...};
    return _v[idx[i]];
  }

  constexpr swz& operator=(const swz& o)
    requires writable
  {
    return *this = o.get();
  }
  constexpr swz& operator=(const V& v)
    requires writable
  {
    int k = 0;
    ((_v[I] = v._v[k++]), ...);
    return *this;
  }
  template <class U>
    requires(writable && is_arith_v<U>)
  constexpr swz& operator=(U s) {
    return *this = V(s);
  }

#define MSL_SWZ_COMPOUND(op)                         \
  template <class U>                                 \
    requires writable                                \
  constexpr swz& operator op##=(const U& u) {         \
    return *this = V(get() op u);                    \
  }
  MSL_SWZ_COMPOUND(+)
  MSL_SWZ_COMPOUND(-)
  MSL_SWZ_COMPOUND(*)
  MSL_SWZ_COMPOUND(/)
  MSL_SWZ_COMPOUND(%)
  MSL_SWZ_COMPOUND(&)
  MSL_SWZ_COMPOUND(|)
  MSL_SWZ_COMPOUND(^)
  MSL_SWZ_COMPOUND(<<)
  MSL_SWZ_COMPOUND(>>)
#undef MSL_SWZ_COMPOUND
};
}  // namespace sim_detail
}  // namespace metal

#include "msl_swizzles.h"

namespace metal {
namespace sim_detail {
template <class A>
struct vec_info {
  static constexpr int size = 0;
  using elem = A;
  static constexpr bool proxy = false;
};
template <class T, int N>
struct vec_info<vec<T, N>> {
  static constexpr int size = N;
  using elem = T;
  static constexpr bool proxy = false;
};
template <class T, int N>
struct vec_info<packed_vec<T, N>> {
  static constexpr int size = N;
  using elem = T;
  static constexpr bool proxy = true;
};
template <class V, class T, int N, int... I>
struct vec_info<swz<V, T, N, I...>> {
  static constexpr int size = sizeof...(I);
  using elem = T;
  static constexpr bool proxy = true;
};

template <class A>
inline constexpr int vsize = vec_info<std::remove_cvref_t<A>>::size;
template <class A>
using velem_t = typename vec_info<std::remove_cvref_t<A>>::elem;
// Swizzles and packed vectors: things that behave as a vec once converted.
template <class A>
inline constexpr bool is_proxy_v = vec_info<std::remove_cvref_t<A>>::proxy;
template <class A>
inline constexpr bool is_vecish_v = vsize<A> > 0;
template <class A>
using vec_of_t = std::conditional_t<is_vecish_v<A>, vec<velem_t<A>, vsize<A>>, std::remove_cvref_t<A>>;

template <class A>
constexpr decltype(auto) to_vec(const A& a) {
  if constexpr (is_proxy_v<A>) return vec_of_t<A>(a.get());
  else return (a);
}

template <class A>
inline constexpr bool is_swz_v = false;
template <class V, class T, int N, int... I>
inline constexpr bool is_swz_v<swz<V, T, N, I...>> = true;

template <class A>
inline constexpr int ncomp = is_arith_v<std::remove_cvref_t<A>> ? 1 : vsize<A>;
}  // namespace sim_detail

template <class T, int N>
struct vec : sim_detail::vec_storage<T, N, false> {
  static_assert(N >= 2 && N <= 4);
  using value_type = T;

  vec() = default;
  constexpr vec(const vec&) = default;
  constexpr vec& operator=(const vec& o) {
    for (int i = 0; i < N; ++i) this->_v[i] = o._v[i];
    return *this;
  }

  // Splat: float4(1), and the implicit scalar->vector conversion of mixed expressions.
  template <class U>
    requires sim_detail::is_arith_v<U>
  constexpr vec(U s) {
    for (int i = 0; i < N; ++i) this->_v[i] = T(s);
  }

  // float4(a.xy, 0, 1), float4(float2, float2), ...: the components must add up to N.
  template <class... A>
    requires(sizeof...(A) >= 2 && (sim_detail::ncomp<A> + ...) == N &&
             ((sim_detail::ncomp<A> > 0) && ...))
  constexpr vec(const A&... a) {
    int i = 0;
    (fill(i, a), ...);
  }

  // float4(half4), half2(h.xy) with a different element type: explicit, as in MSL.
  template <class A>
    requires(sim_detail::vsize<A> == N && !std::is_same_v<sim_detail::velem_t<A>, T>)
  explicit constexpr vec(const A& a) {
    const auto v = sim_detail::to_vec(a);
    for (int i = 0; i < N; ++i) this->_v[i] = T(v._v[i]);
  }

  constexpr T& operator[](int i) { return this->_v[i]; }
  constexpr const T& operator[](int i) const { return this->_v[i]; }

 private:
  template <class A>
  constexpr void fill(int& i, const A& a) {
    if constexpr (sim_detail::is_arith_v<A>) {
      this->_v[i++] = T(a);
    } else {
      const auto v = sim_detail::to_vec(a);
      for (int k = 0; k < sim_detail::vsize<A>; ++k) this->_v[i++] = T(v._v[k]);
    }
  }

  template <class F>
  static constexpr vec map(F f) {
    vec r;
    for (int i = 0; i < N; ++i) r._v[i] = T(f(i));
    return r;
  }
  template <class F>
  static constexpr vec<bool, N> mapb(F f) {
    vec<bool, N> r;
    for (int i = 0; i < N; ++i) r._v[i] = bool(f(i));
    return r;
  }
  static constexpr bool is_int = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  static constexpr bool is_num = !std::is_same_v<T, bool>;

 public:
#define MSL_VEC_BINOP(op, cond)                                                             \
  friend constexpr vec operator op(const vec& a, const vec& b)                              \
    requires(cond)                                                                          \
  {                                                                                         \
    return map([&](int i) { return a._v[i] op b._v[i]; });                                  \
  }                                                                                         \
  friend constexpr vec operator op(const vec& a, T b)                                       \
    requires(cond)                                                                          \
  {                                                                                         \
    return map([&](int i) { return a._v[i] op b; });                                        \
  }                                                                                         \
  friend constexpr vec operator op(T a, const vec& b)                                       \
    requires(cond)                                                                          \
  {                                                                                         \
    return map([&](int i) { return a op b._v[i]; });                                        \
  }                                                                                         \
  template <class U>                                                                        \
    requires(cond)                                                                          \
  constexpr vec& operator op##=(const U& u) {                                               \
    return *this = vec(*this op u);                                                         \
  }
  MSL_VEC_BINOP(+, is_num)
  MSL_VEC_BINOP(-, is_num)
  MSL_VEC_BINOP(*, is_num)
  MSL_VEC_BINOP(/, is_num)
  MSL_VEC_BINOP(%, is_int)
  MSL_VEC_BINOP(&, std::is_integral_v<T>)
  MSL_VEC_BINOP(|, std::is_integral_v<T>)
  MSL_VEC_BINOP(^, std::is_integral_v<T>)
  MSL_VEC_BINOP(<<, is_int)
  MSL_VEC_BINOP(>>, is_int)
#undef MSL_VEC_BINOP

#define MSL_VEC_BOOLOP(op)                                                                   \
  friend constexpr vec<bool, N> operator op(const vec& a, const vec& b) {                    \
    return mapb([&](int i) { return a._v[i] op b._v[i]; });                                  \
  }                                                                                          \
  friend constexpr vec<bool, N> operator op(const vec& a, T b) {                             \
    return mapb([&](int i) { return a._v[i] op b; });                                        \
  }                                                                                          \
  friend constexpr vec<bool, N> operator op(T a, const vec& b) {                             \
    return mapb([&](int i) { return a op b._v[i]; });                                        \
  }
  MSL_VEC_BOOLOP(==)
  MSL_VEC_BOOLOP(!=)
  MSL_VEC_BOOLOP(<)
  MSL_VEC_BOOLOP(<=)
  MSL_VEC_BOOLOP(>)
  MSL_VEC_BOOLOP(>=)
  MSL_VEC_BOOLOP(&&)
  MSL_VEC_BOOLOP(||)
#undef MSL_VEC_BOOLOP

  friend constexpr vec operator-(const vec& a)
    requires is_num
  {
    return map([&](int i) { return -a._v[i]; });
  }
  friend constexpr vec operator+(const vec& a) { return a; }
  friend constexpr vec operator~(const vec& a)
    requires std::is_integral_v<T>
  {
    return map([&](int i) { return ~a._v[i]; });
  }
  friend constexpr vec<bool, N> operator!(const vec& a) {
    return mapb([&](int i) { return !a._v[i]; });
  }

  constexpr vec& operator++()
    requires is_num
  {
    for (int i = 0; i < N; ++i) ++this->_v[i];
    return *this;
  }
  constexpr vec& operator--()
    requires is_num
  {
    for (int i = 0; i < N; ++i) --this->_v[i];
    return *this;
  }
  constexpr vec operator++(int)
    requires is_num
  {
    vec t = *this;
    ++*this;
    return t;
  }
  constexpr vec operator--(int)
    requires is_num
  {
    vec t = *this;
    --*this;
    return t;
  }
};

// packed_float3 etc.: no padding (alignment of the element), converts to and from vec.
template <class T, int N>
struct packed_vec : sim_detail::vec_storage<T, N, true> {
  packed_vec() = default;
  constexpr packed_vec(const packed_vec&) = default;
  constexpr packed_vec& operator=(const packed_vec& o) {
    for (int i = 0; i < N; ++i) this->_v[i] = o._v[i];
    return *this;
  }
  template <class... A>
    requires(sizeof...(A) >= 1 && !(sizeof...(A) == 1 && (std::is_same_v<A, packed_vec> && ...)) &&
             requires(const A&... a) { vec<T, N>(a...); })
  constexpr packed_vec(const A&... a) {
    *this = vec<T, N>(a...);
  }
  constexpr packed_vec& operator=(const vec<T, N>& v) {
    for (int i = 0; i < N; ++i) this->_v[i] = v._v[i];
    return *this;
  }
  constexpr vec<T, N> get() const {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r._v[i] = this->_v[i];
    return r;
  }
  constexpr operator vec<T, N>() const { return get(); }
  constexpr T& operator[](int i) { return this->_v[i]; }
  constexpr const T& operator[](int i) const { return this->_v[i]; }

#define MSL_PACKED_COMPOUND(op)                      \
  template <class U>                                 \
  constexpr packed_vec& operator op##=(const U& u) {  \
    return *this = vec<T, N>(get() op u);            \
  }
  MSL_PACKED_COMPOUND(+)
  MSL_PACKED_COMPOUND(-)
  MSL_PACKED_COMPOUND(*)
  MSL_PACKED_COMPOUND(/)
  MSL_PACKED_COMPOUND(%)
  MSL_PACKED_COMPOUND(&)
  MSL_PACKED_COMPOUND(|)
  MSL_PACKED_COMPOUND(^)
  MSL_PACKED_COMPOUND(<<)
  MSL_PACKED_COMPOUND(>>)
#undef MSL_PACKED_COMPOUND
};

// Operators on swizzles and packed vectors: convert to vec, then use vec's operators.
#define MSL_PROXY_BINOP(op)                                                                 \
  template <class A, class B>                                                                \
    requires(sim_detail::is_proxy_v<A> || sim_detail::is_proxy_v<B>)                         \
  constexpr auto operator op(const A& a, const B& b)                                         \
      -> decltype(sim_detail::to_vec(a) op sim_detail::to_vec(b)) {                          \
    return sim_detail::to_vec(a) op sim_detail::to_vec(b);                                   \
  }
MSL_PROXY_BINOP(+)
MSL_PROXY_BINOP(-)
MSL_PROXY_BINOP(*)
MSL_PROXY_BINOP(/)
MSL_PROXY_BINOP(%)
MSL_PROXY_BINOP(&)
MSL_PROXY_BINOP(|)
MSL_PROXY_BINOP(^)
MSL_PROXY_BINOP(<<)
MSL_PROXY_BINOP(>>)
MSL_PROXY_BINOP(==)
MSL_PROXY_BINOP(!=)
MSL_PROXY_BINOP(<)
MSL_PROXY_BINOP(<=)
MSL_PROXY_BINOP(>)
MSL_PROXY_BINOP(>=)
MSL_PROXY_BINOP(&&)
MSL_PROXY_BINOP(||)
#undef MSL_PROXY_BINOP

#define MSL_PROXY_UNOP(op)                                                                  \
  template <class A>                                                                         \
    requires sim_detail::is_proxy_v<A>                                                       \
  constexpr auto operator op(const A& a) -> decltype(op sim_detail::to_vec(a)) {             \
    return op sim_detail::to_vec(a);                                                         \
  }
MSL_PROXY_UNOP(-)
MSL_PROXY_UNOP(+)
MSL_PROXY_UNOP(~)
MSL_PROXY_UNOP(!)
#undef MSL_PROXY_UNOP

// Type traits (Metal's <metal_type_traits>, with half and bfloat as floating point types).
using std::conditional_t;
using std::decay_t;
using std::enable_if;
using std::enable_if_t;
using std::integral_constant;
using std::is_convertible_v;
using std::is_integral_v;
using std::is_same;
using std::is_same_v;
using std::is_signed_v;
using std::is_unsigned_v;
using std::make_signed_t;
using std::make_unsigned_t;
using std::remove_const_t;
using std::remove_cv_t;
using std::remove_reference_t;
using std::true_type;
using std::false_type;

template <class T>
inline constexpr bool is_floating_point_v = sim_detail::is_fp_v<T>;
template <class T>
struct is_floating_point : std::bool_constant<is_floating_point_v<T>> {};
template <class T>
inline constexpr bool is_arithmetic_v = sim_detail::is_arith_v<T>;
template <class T>
struct is_arithmetic : std::bool_constant<is_arithmetic_v<T>> {};
template <class T>
inline constexpr bool is_vector_v = sim_detail::vsize<T> > 0 && !sim_detail::is_proxy_v<T>;
template <class T>
struct is_vector : std::bool_constant<is_vector_v<T>> {};
template <class T>
struct vec_elements : std::integral_constant<int, sim_detail::vsize<T>> {};
template <class T>
using make_scalar_t = sim_detail::velem_t<T>;

// numeric_limits with half and bfloat.
template <class T>
struct numeric_limits : std::numeric_limits<T> {};
template <>
struct numeric_limits<half> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static constexpr half min() { return __builtin_bit_cast(half, uint16_t(0x0400)); }
  static constexpr half max() { return __builtin_bit_cast(half, uint16_t(0x7bff)); }
  static constexpr half lowest() { return __builtin_bit_cast(half, uint16_t(0xfbff)); }
  static constexpr half epsilon() { return __builtin_bit_cast(half, uint16_t(0x1400)); }
  static constexpr half infinity() { return __builtin_bit_cast(half, uint16_t(0x7c00)); }
  static constexpr half quiet_NaN() { return __builtin_bit_cast(half, uint16_t(0x7e00)); }
  static constexpr half denorm_min() { return __builtin_bit_cast(half, uint16_t(0x0001)); }
};
template <>
struct numeric_limits<bfloat> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static constexpr bfloat min() { return bfloat::from_bits(0x0080); }
  static constexpr bfloat max() { return bfloat::from_bits(0x7f7f); }
  static constexpr bfloat lowest() { return bfloat::from_bits(0xff7f); }
  static constexpr bfloat epsilon() { return bfloat::from_bits(0x3c00); }
  static constexpr bfloat infinity() { return bfloat::from_bits(0x7f80); }
  static constexpr bfloat quiet_NaN() { return bfloat::from_bits(0x7fc0); }
  static constexpr bfloat denorm_min() { return bfloat::from_bits(0x0001); }
};

// as_type<T>(x): reinterpret the bits of an equally sized value.
template <class To, class From>
inline To as_type(const From& from) {
  // A swizzle is read as its vector value; packed vectors keep their unpadded layout.
  const auto f = [&] {
    if constexpr (sim_detail::is_swz_v<From>) return from.get();
    else return from;
  }();
  static_assert(sizeof(To) == sizeof(f), "as_type needs types of equal size");
  using F = std::remove_cvref_t<decltype(f)>;
  static_assert(!std::is_pointer_v<F> && !std::is_pointer_v<To> && !::mlxsim::is_checked_pointer<F> &&
                    !::mlxsim::is_checked_pointer<To>,
                "as_type of a pointer: a pointer's bits are no value a Metal kernel reads");
  To to;
  std::memcpy(static_cast<void*>(&to), static_cast<const void*>(&f), sizeof(To));
  return to;
}
}  // namespace metal

using metal::as_type;
using metal::packed_vec;
using metal::vec;

#define MSL_VEC_TYPES(T, name)                 \
  using name##2 = metal::vec<T, 2>;            \
  using name##3 = metal::vec<T, 3>;            \
  using name##4 = metal::vec<T, 4>;            \
  using packed_##name##2 = metal::packed_vec<T, 2>; \
  using packed_##name##3 = metal::packed_vec<T, 3>; \
  using packed_##name##4 = metal::packed_vec<T, 4>;
MSL_VEC_TYPES(bool, bool)
MSL_VEC_TYPES(signed char, char)
MSL_VEC_TYPES(unsigned char, uchar)
MSL_VEC_TYPES(short, short)
MSL_VEC_TYPES(unsigned short, ushort)
MSL_VEC_TYPES(int, int)
MSL_VEC_TYPES(unsigned int, uint)
MSL_VEC_TYPES(long, long)
MSL_VEC_TYPES(unsigned long, ulong)
MSL_VEC_TYPES(half, half)
MSL_VEC_TYPES(bfloat, bfloat)
MSL_VEC_TYPES(float, float)
#undef MSL_VEC_TYPES
