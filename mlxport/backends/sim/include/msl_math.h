// MSL math, geometric, relational and integer functions for the Metal simulator.
//
// Everything lives in metal::precise (an inline namespace, so metal::exp is the precise one,
// as under MLX's default "safe" math mode); metal::fast names the same functions: the simulator
// checks correctness, not the ULP-level differences of fast math.
// Float functions use the C library through compiler builtins (no <cmath>, see msl_types.h);
// half and bfloat compute in float and round once. Integer arguments to float-only
// functions are promoted to float; a double argument mixed with a narrower float type takes
// that type, since MSL has no double and treats such literals as float.
#pragma once

#include "msl_types.h"

namespace metal {
namespace sim_detail {
template <class T>
inline constexpr bool is_scalar_v = is_arith_v<std::remove_cvref_t<T>>;

// Result of a float function on scalar arguments.
template <class A, class B>
struct fp_common {
  using type = decltype(A() + B());
};
template <class A>
struct fp_common<A, A> {
  using type = A;
};
template <class A>
  requires(!std::is_same_v<A, double>)
struct fp_common<A, double> {
  using type = std::conditional_t<is_fp_v<A>, A, double>;
};
template <class B>
  requires(!std::is_same_v<B, double>)
struct fp_common<double, B> {
  using type = std::conditional_t<is_fp_v<B>, B, double>;
};
template <class A>
  requires(!is_bfloat_v<A> && !std::is_same_v<A, double>)
struct fp_common<bfloat, A> {
  using type = std::conditional_t<std::is_integral_v<A>, bfloat, float>;
};
template <class A>
  requires(!is_bfloat_v<A> && !std::is_same_v<A, double>)
struct fp_common<A, bfloat> {
  using type = std::conditional_t<std::is_integral_v<A>, bfloat, float>;
};

template <class... A>
struct common_elem;
template <class A>
struct common_elem<A> {
  using type = A;
};
template <class A, class B, class... R>
struct common_elem<A, B, R...> {
  using type = typename common_elem<typename fp_common<A, B>::type, R...>::type;
};
// Element type of the arguments, scalars and vectors alike.
template <class... A>
using elem_t = typename common_elem<velem_t<A>...>::type;
template <class... A>
using float_elem_t = std::conditional_t<std::is_integral_v<elem_t<A...>>, float, elem_t<A...>>;

// In a call with vector arguments the vectors' element type wins; scalars are converted to it.
template <class... A>
struct first_vec_elem;
template <class A, class... R>
struct first_vec_elem<A, R...> {
  using type = std::conditional_t<is_vecish_v<A>, velem_t<A>, typename first_vec_elem<R...>::type>;
};
template <>
struct first_vec_elem<> {
  using type = void;
};
template <class... A>
using vec_elem_t = typename common_elem<
    std::conditional_t<is_vecish_v<A>, velem_t<A>, typename first_vec_elem<A...>::type>...>::type;
template <class... A>
using float_vec_elem_t = std::conditional_t<std::is_integral_v<vec_elem_t<A...>>, float, vec_elem_t<A...>>;

template <class... A>
inline constexpr int vec_n = [] {
  int n = 0;
  ((n = vsize<A> > n ? vsize<A> : n), ...);
  return n;
}();
template <class... A>
inline constexpr bool any_vec_v = (is_vecish_v<A> || ...);
template <class... A>
inline constexpr bool all_scalar_v = (is_scalar_v<A> && ...);
// Vector arguments of one call must agree in length; scalars broadcast.
template <class... A>
inline constexpr bool same_len_v = ((vsize<A> == 0 || vsize<A> == vec_n<A...>) && ...);
template <class... A>
concept vec_args = any_vec_v<A...> && same_len_v<A...> && ((is_scalar_v<A> || is_vecish_v<A>) && ...);

template <class A>
constexpr auto lane(const A& a, int i) {
  if constexpr (is_vecish_v<A>) return a[i];
  else return a;
}

// Apply f lane by lane; R is the result element type.
template <class R, int N, class F, class... A>
constexpr vec<R, N> lanes(F f, const A&... a) {
  vec<R, N> r;
  for (int i = 0; i < N; ++i) r[i] = R(f(lane(a, i)...));
  return r;
}
template <class R, class F, class... A>
constexpr auto vmap(F f, const A&... a) {
  return lanes<R, vec_n<A...>>(f, to_vec(a)...);
}

template <class T>
constexpr float widen(T x) {
  return float(x);
}
constexpr double widen(double x) { return x; }
}  // namespace sim_detail

inline namespace precise {

// ----- unary float functions ------------------------------------------------------------------
#define MSL_UNARY_FP(name, ffun, dfun)                                                      \
  template <class X>                                                                         \
    requires sim_detail::is_scalar_v<X>                                                      \
  constexpr auto name(X x) {                                                                 \
    using R = sim_detail::float_elem_t<X>;                                                   \
    if constexpr (std::is_same_v<R, double>) return dfun(x);                                \
    else return R(ffun(float(x)));                                                          \
  }                                                                                          \
  template <class X>                                                                         \
    requires sim_detail::vec_args<X>                                                         \
  constexpr auto name(const X& x) {                                                          \
    return sim_detail::vmap<sim_detail::float_vec_elem_t<X>>([](auto e) { return name(e); }, x); \
  }

}  // namespace precise

namespace sim_detail {
inline float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
inline double rsqrtd(double x) { return 1.0 / __builtin_sqrt(x); }
inline float exp10f(float x) { return __builtin_powf(10.0f, x); }
inline double exp10d(double x) { return __builtin_pow(10.0, x); }
// MSL fract: x - floor(x), clamped below 1.
inline float fractf(float x) { return __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f); }
inline double fractd(double x) { return __builtin_fmin(x - __builtin_floor(x), 0x1.fffffffffffffp-1); }
constexpr float pi_f = 3.14159265358979323846f;
inline float sinpif(float x) { return __builtin_sinf(pi_f * x); }
inline double sinpid(double x) { return __builtin_sin(3.14159265358979323846 * x); }
inline float cospif(float x) { return __builtin_cosf(pi_f * x); }
inline double cospid(double x) { return __builtin_cos(3.14159265358979323846 * x); }
inline float tanpif(float x) { return __builtin_tanf(pi_f * x); }
inline double tanpid(double x) { return __builtin_tan(3.14159265358979323846 * x); }
// MSL sign: 1, -1, keeps the sign of zero, 0 for NaN.
inline float signf(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x == x ? x : 0.0f; }
inline double signd(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x == x ? x : 0.0; }
inline float fma1(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline double fma1(double a, double b, double c) { return __builtin_fma(a, b, c); }
inline float saturatef(float x) { return __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f); }
inline double saturated(double x) { return __builtin_fmin(__builtin_fmax(x, 0.0), 1.0); }
}  // namespace sim_detail

inline namespace precise {

MSL_UNARY_FP(fabs, __builtin_fabsf, __builtin_fabs)
MSL_UNARY_FP(floor, __builtin_floorf, __builtin_floor)
MSL_UNARY_FP(ceil, __builtin_ceilf, __builtin_ceil)
MSL_UNARY_FP(round, __builtin_roundf, __builtin_round)
MSL_UNARY_FP(rint, __builtin_rintf, __builtin_rint)
MSL_UNARY_FP(trunc, __builtin_truncf, __builtin_trunc)
MSL_UNARY_FP(fract, sim_detail::fractf, sim_detail::fractd)
MSL_UNARY_FP(exp, __builtin_expf, __builtin_exp)
MSL_UNARY_FP(exp2, __builtin_exp2f, __builtin_exp2)
MSL_UNARY_FP(exp10, sim_detail::exp10f, sim_detail::exp10d)
MSL_UNARY_FP(log, __builtin_logf, __builtin_log)
MSL_UNARY_FP(log2, __builtin_log2f, __builtin_log2)
MSL_UNARY_FP(log10, __builtin_log10f, __builtin_log10)
MSL_UNARY_FP(sqrt, __builtin_sqrtf, __builtin_sqrt)
MSL_UNARY_FP(rsqrt, sim_detail::rsqrtf, sim_detail::rsqrtd)
MSL_UNARY_FP(sin, __builtin_sinf, __builtin_sin)
MSL_UNARY_FP(cos, __builtin_cosf, __builtin_cos)
MSL_UNARY_FP(tan, __builtin_tanf, __builtin_tan)
MSL_UNARY_FP(sinpi, sim_detail::sinpif, sim_detail::sinpid)
MSL_UNARY_FP(cospi, sim_detail::cospif, sim_detail::cospid)
MSL_UNARY_FP(tanpi, sim_detail::tanpif, sim_detail::tanpid)
MSL_UNARY_FP(asin, __builtin_asinf, __builtin_asin)
MSL_UNARY_FP(acos, __builtin_acosf, __builtin_acos)
MSL_UNARY_FP(atan, __builtin_atanf, __builtin_atan)
MSL_UNARY_FP(sinh, __builtin_sinhf, __builtin_sinh)
MSL_UNARY_FP(cosh, __builtin_coshf, __builtin_cosh)
MSL_UNARY_FP(tanh, __builtin_tanhf, __builtin_tanh)
MSL_UNARY_FP(asinh, __builtin_asinhf, __builtin_asinh)
MSL_UNARY_FP(acosh, __builtin_acoshf, __builtin_acosh)
MSL_UNARY_FP(atanh, __builtin_atanhf, __builtin_atanh)
MSL_UNARY_FP(sign, sim_detail::signf, sim_detail::signd)
MSL_UNARY_FP(saturate, sim_detail::saturatef, sim_detail::saturated)
#undef MSL_UNARY_FP

// ----- binary float functions -----------------------------------------------------------------
#define MSL_BINARY_FP(name, ffun, dfun)                                                      \
  template <class X, class Y>                                                                 \
    requires sim_detail::all_scalar_v<X, Y>                                                   \
  constexpr auto name(X x, Y y) {                                                             \
    using R = sim_detail::float_elem_t<X, Y>;                                                 \
    if constexpr (std::is_same_v<R, double>) return dfun(double(x), double(y));              \
    else return R(ffun(float(x), float(y)));                                                 \
  }                                                                                           \
  template <class X, class Y>                                                                 \
    requires sim_detail::vec_args<X, Y>                                                       \
  constexpr auto name(const X& x, const Y& y) {                                               \
    return sim_detail::vmap<sim_detail::float_vec_elem_t<X, Y>>(                                  \
        [](auto a, auto b) { return name(a, b); }, x, y);                                     \
  }

}  // namespace precise

namespace sim_detail {
// powr is pow restricted to x >= 0.
inline float powrf(float x, float y) { return x < 0 ? __builtin_nanf("") : __builtin_powf(x, y); }
inline double powrd(double x, double y) { return x < 0 ? __builtin_nan("") : __builtin_pow(x, y); }
inline float stepf(float edge, float x) { return x < edge ? 0.0f : 1.0f; }
inline double stepd(double edge, double x) { return x < edge ? 0.0 : 1.0; }
}  // namespace sim_detail

inline namespace precise {

MSL_BINARY_FP(pow, __builtin_powf, __builtin_pow)
MSL_BINARY_FP(powr, sim_detail::powrf, sim_detail::powrd)
MSL_BINARY_FP(atan2, __builtin_atan2f, __builtin_atan2)
MSL_BINARY_FP(fmod, __builtin_fmodf, __builtin_fmod)
MSL_BINARY_FP(fmin, __builtin_fminf, __builtin_fmin)
MSL_BINARY_FP(fmax, __builtin_fmaxf, __builtin_fmax)
MSL_BINARY_FP(fdim, __builtin_fdimf, __builtin_fdim)
MSL_BINARY_FP(copysign, __builtin_copysignf, __builtin_copysign)
MSL_BINARY_FP(step, sim_detail::stepf, sim_detail::stepd)
#undef MSL_BINARY_FP

// nextafter must step in the argument's own format, so half and bfloat work on their bits.
}  // namespace precise

namespace sim_detail {
template <class T, class U>
inline T next_bits(T x, T y) {
  if (x != x || y != y) return T(widen(x) + widen(y));
  if (x == y) return y;
  U b = __builtin_bit_cast(U, x);
  constexpr U sign = U(U(1) << (sizeof(U) * 8 - 1));
  if ((b & U(~sign)) == 0) b = U((__builtin_bit_cast(U, y) & sign) | 1);
  else if ((x < y) == !(b & sign)) ++b;
  else --b;
  return __builtin_bit_cast(T, b);
}
}  // namespace sim_detail

inline namespace precise {
template <class X, class Y>
  requires sim_detail::all_scalar_v<X, Y>
inline auto nextafter(X x, Y y) {
  using R = sim_detail::float_elem_t<X, Y>;
  if constexpr (sim_detail::is_half_v<R>) return sim_detail::next_bits<half, uint16_t>(R(x), R(y));
  else if constexpr (sim_detail::is_bfloat_v<R>) return sim_detail::next_bits<bfloat, uint16_t>(R(x), R(y));
  else if constexpr (std::is_same_v<R, double>) return __builtin_nextafter(double(x), double(y));
  else return __builtin_nextafterf(float(x), float(y));
}
template <class X, class Y>
  requires sim_detail::vec_args<X, Y>
inline auto nextafter(const X& x, const Y& y) {
  return sim_detail::vmap<sim_detail::float_vec_elem_t<X, Y>>([](auto a, auto b) { return nextafter(a, b); }, x, y);
}

// divide(x, y): MSL's fast::divide / precise::divide.
template <class X, class Y>
  requires(sim_detail::all_scalar_v<X, Y> || sim_detail::vec_args<X, Y>)
constexpr auto divide(const X& x, const Y& y) {
  return sim_detail::to_vec(x) / sim_detail::to_vec(y);
}

// ----- ternary float functions ----------------------------------------------------------------
#define MSL_TERNARY(name, expr)                                                               \
  template <class X, class Y, class Z>                                                        \
    requires sim_detail::all_scalar_v<X, Y, Z>                                                \
  constexpr auto name(X x, Y y, Z z) {                                                        \
    using R = sim_detail::float_elem_t<X, Y, Z>;                                              \
    using C = decltype(sim_detail::widen(R()));                                               \
    const C a = C(x), b = C(y), c = C(z);                                                     \
    return R(expr);                                                                           \
  }                                                                                           \
  template <class X, class Y, class Z>                                                        \
    requires sim_detail::vec_args<X, Y, Z>                                                    \
  constexpr auto name(const X& x, const Y& y, const Z& z) {                                   \
    return sim_detail::vmap<sim_detail::float_vec_elem_t<X, Y, Z>>(                               \
        [](auto a, auto b, auto c) { return name(a, b, c); }, x, y, z);                       \
  }

MSL_TERNARY(fma, sim_detail::fma1(a, b, c))
MSL_TERNARY(mad, a * b + c)
MSL_TERNARY(mix, a + (b - a) * c)
MSL_TERNARY(smoothstep, ([&] {
              C t = (c - a) / (b - a);
              t = t < 0 ? C(0) : t > 1 ? C(1) : t;
              return t * t * (3 - 2 * t);
            }()))
#undef MSL_TERNARY

// ----- min, max, clamp, abs: integer and float --------------------------------------------------
}  // namespace precise

namespace sim_detail {
template <class... A>
using arith_elem_t = elem_t<A...>;
template <class T>
constexpr T min1(T a, T b) {
  if constexpr (is_fp_v<T>) return T(__builtin_fmin(widen(a), widen(b)));
  else return b < a ? b : a;
}
template <class T>
constexpr T max1(T a, T b) {
  if constexpr (is_fp_v<T>) return T(__builtin_fmax(widen(a), widen(b)));
  else return a < b ? b : a;
}
}  // namespace sim_detail

inline namespace precise {

template <class X, class Y>
  requires sim_detail::all_scalar_v<X, Y>
constexpr auto min(X x, Y y) {
  using R = sim_detail::arith_elem_t<X, Y>;
  return sim_detail::min1<R>(R(x), R(y));
}
template <class X, class Y>
  requires sim_detail::vec_args<X, Y>
constexpr auto min(const X& x, const Y& y) {
  return sim_detail::vmap<sim_detail::vec_elem_t<X, Y>>([](auto a, auto b) { return min(a, b); }, x, y);
}
template <class X, class Y>
  requires sim_detail::all_scalar_v<X, Y>
constexpr auto max(X x, Y y) {
  using R = sim_detail::arith_elem_t<X, Y>;
  return sim_detail::max1<R>(R(x), R(y));
}
template <class X, class Y>
  requires sim_detail::vec_args<X, Y>
constexpr auto max(const X& x, const Y& y) {
  return sim_detail::vmap<sim_detail::vec_elem_t<X, Y>>([](auto a, auto b) { return max(a, b); }, x, y);
}
template <class X, class Y, class Z>
  requires(sim_detail::all_scalar_v<X, Y, Z> || sim_detail::vec_args<X, Y, Z>)
constexpr auto clamp(const X& x, const Y& lo, const Z& hi) {
  return min(max(x, lo), hi);
}
template <class X, class Y, class Z>
  requires(sim_detail::all_scalar_v<X, Y, Z> || sim_detail::vec_args<X, Y, Z>)
constexpr auto min3(const X& x, const Y& y, const Z& z) {
  return min(min(x, y), z);
}
template <class X, class Y, class Z>
  requires(sim_detail::all_scalar_v<X, Y, Z> || sim_detail::vec_args<X, Y, Z>)
constexpr auto max3(const X& x, const Y& y, const Z& z) {
  return max(max(x, y), z);
}
template <class X, class Y, class Z>
  requires(sim_detail::all_scalar_v<X, Y, Z> || sim_detail::vec_args<X, Y, Z>)
constexpr auto median3(const X& x, const Y& y, const Z& z) {
  return max(min(x, y), min(max(x, y), z));
}

template <class X>
  requires sim_detail::is_scalar_v<X>
constexpr auto abs(X x) {
  if constexpr (sim_detail::is_fp_v<X>) return fabs(x);
  else if constexpr (std::is_unsigned_v<X>) return x;
  else return X(x < 0 ? -x : x);
}
template <class X>
  requires sim_detail::vec_args<X>
constexpr auto abs(const X& x) {
  return sim_detail::vmap<sim_detail::velem_t<X>>([](auto e) { return abs(e); }, x);
}

// ----- classification (scalar -> bool, vector -> boolN) ----------------------------------------
#define MSL_CLASSIFY(name, expr)                                                              \
  template <class X>                                                                          \
    requires sim_detail::is_scalar_v<X>                                                       \
  constexpr bool name(X x_) {                                                                 \
    const auto x = sim_detail::widen(x_);                                                     \
    return expr;                                                                              \
  }                                                                                           \
  template <class X>                                                                          \
    requires sim_detail::vec_args<X>                                                          \
  constexpr auto name(const X& x) {                                                           \
    return sim_detail::vmap<bool>([](auto e) { return name(e); }, x);                         \
  }
MSL_CLASSIFY(isnan, x != x)
MSL_CLASSIFY(isinf, __builtin_isinf(x))
MSL_CLASSIFY(isfinite, __builtin_isfinite(x))
MSL_CLASSIFY(isnormal, __builtin_isnormal(x))
MSL_CLASSIFY(signbit, __builtin_signbit(x))
#undef MSL_CLASSIFY

// ----- functions with an output argument --------------------------------------------------------
template <class X>
  requires sim_detail::is_scalar_v<X>
inline auto sincos(X x, sim_detail::float_elem_t<X>& cosval) {
  cosval = cos(x);
  return sin(x);
}
template <class X>
  requires sim_detail::vec_args<X>
inline auto sincos(const X& x, sim_detail::vec_of_t<X>& cosval) {
  cosval = cos(x);
  return sin(x);
}
template <class X>
  requires sim_detail::is_scalar_v<X>
inline auto modf(X x, sim_detail::float_elem_t<X>& intval) {
  using R = sim_detail::float_elem_t<X>;
  intval = trunc(x);
  return __builtin_isinf(sim_detail::widen(x)) ? R(copysign(0.0f, x)) : R(x - intval);
}
template <class X>
  requires sim_detail::vec_args<X>
inline auto modf(const X& x, sim_detail::vec_of_t<X>& intval) {
  sim_detail::vec_of_t<X> r, v = sim_detail::to_vec(x);
  for (int i = 0; i < sim_detail::vsize<X>; ++i) r[i] = modf(v[i], intval[i]);
  return r;
}
template <class X>
  requires sim_detail::is_scalar_v<X>
inline auto frexp(X x, int& exponent) {
  using R = sim_detail::float_elem_t<X>;
  if constexpr (std::is_same_v<R, double>) return __builtin_frexp(x, &exponent);
  else return R(__builtin_frexpf(float(x), &exponent));
}
template <class X, int N>
  requires(sim_detail::vsize<X> == N)
inline auto frexp(const X& x, vec<int, N>& exponent) {
  sim_detail::vec_of_t<X> r, v = sim_detail::to_vec(x);
  for (int i = 0; i < N; ++i) r[i] = frexp(v[i], exponent[i]);
  return r;
}
template <class X>
  requires sim_detail::is_scalar_v<X>
inline auto ldexp(X x, int k) {
  using R = sim_detail::float_elem_t<X>;
  if constexpr (std::is_same_v<R, double>) return __builtin_ldexp(x, k);
  else return R(__builtin_ldexpf(float(x), k));
}
template <class X, class K>
  requires sim_detail::vec_args<X, K>
inline auto ldexp(const X& x, const K& k) {
  return sim_detail::vmap<sim_detail::float_vec_elem_t<X>>([](auto a, auto b) { return ldexp(a, int(b)); }, x, k);
}

// ----- geometric ----------------------------------------------------------------------------------
template <class X, class Y>
  requires(sim_detail::is_vecish_v<X> && sim_detail::vec_args<X, Y>)
constexpr auto dot(const X& x, const Y& y) {
  using R = sim_detail::elem_t<X, Y>;
  const auto a = sim_detail::to_vec(x);
  const auto b = sim_detail::to_vec(y);
  R r = R(a[0]) * R(b[0]);
  for (int i = 1; i < sim_detail::vsize<X>; ++i) r = R(r + R(a[i]) * R(b[i]));
  return r;
}
template <class X>
  requires(sim_detail::is_vecish_v<X>)
constexpr auto length_squared(const X& x) {
  return dot(x, x);
}
template <class X>
  requires(sim_detail::is_vecish_v<X>)
inline auto length(const X& x) {
  return sqrt(dot(x, x));
}
template <class X, class Y>
  requires(sim_detail::is_vecish_v<X> && sim_detail::vec_args<X, Y>)
inline auto distance(const X& x, const Y& y) {
  return length(sim_detail::to_vec(x) - sim_detail::to_vec(y));
}
template <class X>
  requires(sim_detail::is_vecish_v<X>)
inline auto normalize(const X& x) {
  const auto v = sim_detail::to_vec(x);
  return v * rsqrt(dot(v, v));
}
template <class X, class Y>
  requires(sim_detail::vsize<X> == 3 && sim_detail::vsize<Y> == 3)
constexpr auto cross(const X& x, const Y& y) {
  const auto a = sim_detail::to_vec(x);
  const auto b = sim_detail::to_vec(y);
  return decltype(a)(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
template <class X, class Y>
  requires(sim_detail::is_vecish_v<X> && sim_detail::vec_args<X, Y>)
constexpr auto reflect(const X& i, const Y& n) {
  const auto v = sim_detail::to_vec(i);
  const auto m = sim_detail::to_vec(n);
  return v - 2 * dot(m, v) * m;
}

// ----- relational -----------------------------------------------------------------------------------
template <int N>
constexpr bool all(const vec<bool, N>& b) {
  for (int i = 0; i < N; ++i)
    if (!b[i]) return false;
  return true;
}
template <int N>
constexpr bool any(const vec<bool, N>& b) {
  for (int i = 0; i < N; ++i)
    if (b[i]) return true;
  return false;
}
constexpr bool all(bool b) { return b; }
constexpr bool any(bool b) { return b; }
template <class X>
  requires(sim_detail::is_proxy_v<X> && std::is_same_v<sim_detail::velem_t<X>, bool>)
constexpr bool all(const X& b) {
  return all(sim_detail::to_vec(b));
}
template <class X>
  requires(sim_detail::is_proxy_v<X> && std::is_same_v<sim_detail::velem_t<X>, bool>)
constexpr bool any(const X& b) {
  return any(sim_detail::to_vec(b));
}

// select(a, b, c): c ? b : a, per lane when c is a vector.
template <class A, class B>
  requires sim_detail::all_scalar_v<A, B>
constexpr auto select(A a, B b, bool c) {
  using R = sim_detail::arith_elem_t<A, B>;
  return c ? R(b) : R(a);
}
template <class A, class B, class C>
  requires(sim_detail::vec_args<A, B, C> && std::is_same_v<sim_detail::velem_t<C>, bool>)
constexpr auto select(const A& a, const B& b, const C& c) {
  return sim_detail::vmap<sim_detail::vec_elem_t<A, B>>(
      [](auto x, auto y, bool z) { return z ? y : x; }, a, b, c);
}

// ----- integer ---------------------------------------------------------------------------------------
}  // namespace precise

namespace sim_detail {
template <class T>
inline constexpr int bits_v = int(sizeof(T) * 8);
template <class T>
using ubits_t = std::make_unsigned_t<T>;
template <class T>
constexpr int popcount1(T x) {
  return __builtin_popcountll((unsigned long long)ubits_t<T>(x));
}
template <class T>
constexpr int clz1(T x) {
  const auto u = (unsigned long long)ubits_t<T>(x);
  return u == 0 ? bits_v<T> : __builtin_clzll(u) - (64 - bits_v<T>);
}
template <class T>
constexpr int ctz1(T x) {
  const auto u = (unsigned long long)ubits_t<T>(x);
  return u == 0 ? bits_v<T> : __builtin_ctzll(u);
}
template <class T>
constexpr T reverse1(T x) {
  ubits_t<T> u = ubits_t<T>(x), r = 0;
  for (int i = 0; i < bits_v<T>; ++i, u >>= 1) r = ubits_t<T>((r << 1) | (u & 1));
  return T(r);
}
template <class T>
constexpr T rotate1(T x, T k) {
  const int n = bits_v<T>;
  const int s = int(ubits_t<T>(k) % ubits_t<T>(n));
  const ubits_t<T> u = ubits_t<T>(x);
  return s == 0 ? x : T(ubits_t<T>((u << s) | (u >> (n - s))));
}
template <class T>
constexpr T mulhi1(T a, T b) {
  if constexpr (sizeof(T) == 8) {
    using W = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
    return T((W(a) * W(b)) >> 64);
  } else {
    return T((int64_t(a) * int64_t(b)) >> bits_v<T>);
  }
}
template <class T>
constexpr ubits_t<T> absdiff1(T a, T b) {
  return a > b ? ubits_t<T>(ubits_t<T>(a) - ubits_t<T>(b)) : ubits_t<T>(ubits_t<T>(b) - ubits_t<T>(a));
}
template <class T>
constexpr T addsat1(T a, T b) {
  T r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min()) : r;
}
template <class T>
constexpr T subsat1(T a, T b) {
  T r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  if constexpr (std::is_unsigned_v<T>) return 0;
  else return b < 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
}
template <class T>
constexpr T hadd1(T a, T b) {
  return T((a >> 1) + (b >> 1) + (a & b & 1));
}
template <class T>
constexpr T rhadd1(T a, T b) {
  return T((a >> 1) + (b >> 1) + ((a | b) & 1));
}
template <class T>
constexpr T extract_bits1(T x, uint offset, uint bits) {
  if (bits == 0) return T(0);
  const ubits_t<T> u = ubits_t<T>(ubits_t<T>(x) << (bits_v<T> - offset - bits));
  if constexpr (std::is_signed_v<T>) return T(T(u) >> (bits_v<T> - bits));
  else return T(u >> (bits_v<T> - bits));
}
template <class T>
constexpr T insert_bits1(T base, T insert, uint offset, uint bits) {
  if (bits == 0) return base;
  const ubits_t<T> ones = ubits_t<T>(~ubits_t<T>(0));
  const ubits_t<T> mask = ubits_t<T>(ubits_t<T>(ones >> (bits_v<T> - bits)) << offset);
  return T((ubits_t<T>(base) & ubits_t<T>(~mask)) | (ubits_t<T>(ubits_t<T>(insert) << offset) & mask));
}
template <class... A>
concept int_args = (std::is_integral_v<velem_t<A>> && ...);
}  // namespace sim_detail

inline namespace precise {

#define MSL_INT_UNARY(name, impl, R)                                                           \
  template <class X>                                                                           \
    requires(sim_detail::is_scalar_v<X> && sim_detail::int_args<X>)                            \
  constexpr auto name(X x) {                                                                   \
    using T = X;                                                                               \
    return R(sim_detail::impl(x));                                                             \
  }                                                                                            \
  template <class X>                                                                           \
    requires(sim_detail::vec_args<X> && sim_detail::int_args<X>)                               \
  constexpr auto name(const X& x) {                                                            \
    using T = sim_detail::velem_t<X>;                                                          \
    return sim_detail::vmap<R>([](T e) { return name(e); }, x);                                \
  }
MSL_INT_UNARY(popcount, popcount1, T)
MSL_INT_UNARY(clz, clz1, T)
MSL_INT_UNARY(ctz, ctz1, T)
MSL_INT_UNARY(reverse_bits, reverse1, T)
#undef MSL_INT_UNARY

#define MSL_INT_BINARY(name, impl, R)                                                          \
  template <class X, class Y>                                                                  \
    requires(sim_detail::all_scalar_v<X, Y> && sim_detail::int_args<X, Y>)                     \
  constexpr auto name(X x, Y y) {                                                              \
    using T = sim_detail::arith_elem_t<X, Y>;                                                  \
    return sim_detail::impl<T>(T(x), T(y));                                                    \
  }                                                                                            \
  template <class X, class Y>                                                                  \
    requires(sim_detail::vec_args<X, Y> && sim_detail::int_args<X, Y>)                         \
  constexpr auto name(const X& x, const Y& y) {                                                \
    using T = sim_detail::arith_elem_t<X, Y>;                                                  \
    return sim_detail::vmap<R>([](T a, T b) { return name(a, b); }, x, y);                     \
  }
MSL_INT_BINARY(rotate, rotate1, T)
MSL_INT_BINARY(mulhi, mulhi1, T)
MSL_INT_BINARY(absdiff, absdiff1, sim_detail::ubits_t<T>)
MSL_INT_BINARY(addsat, addsat1, T)
MSL_INT_BINARY(subsat, subsat1, T)
MSL_INT_BINARY(hadd, hadd1, T)
MSL_INT_BINARY(rhadd, rhadd1, T)
#undef MSL_INT_BINARY

template <class X>
  requires(sim_detail::is_scalar_v<X> && sim_detail::int_args<X>)
constexpr X extract_bits(X x, uint offset, uint bits) {
  return sim_detail::extract_bits1(x, offset, bits);
}
template <class X>
  requires(sim_detail::vec_args<X> && sim_detail::int_args<X>)
constexpr auto extract_bits(const X& x, uint offset, uint bits) {
  using T = sim_detail::velem_t<X>;
  return sim_detail::vmap<T>([=](T e) { return sim_detail::extract_bits1(e, offset, bits); }, x);
}
template <class X, class Y>
  requires(sim_detail::is_scalar_v<X> && sim_detail::int_args<X, Y>)
constexpr X insert_bits(X base, Y insert, uint offset, uint bits) {
  return sim_detail::insert_bits1(base, X(insert), offset, bits);
}
template <class X, class Y>
  requires(sim_detail::vec_args<X, Y> && sim_detail::int_args<X, Y>)
constexpr auto insert_bits(const X& base, const Y& insert, uint offset, uint bits) {
  using T = sim_detail::velem_t<X>;
  return sim_detail::vmap<T>([=](T b, T i) { return sim_detail::insert_bits1(b, i, offset, bits); },
                             base, insert);
}

}  // inline namespace precise

namespace fast {
using namespace metal::precise;
}
}  // namespace metal
