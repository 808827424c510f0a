// The execution half of MSL for the Metal simulator: checked address-space pointers,
// threadgroup storage, barriers, SIMD-group and quad-group functions, atomics and
// simdgroup_matrix. The value half (types, math) comes from msl_types.h / msl_math.h.
//
// Kernel text reaches this header through mlxport/backends/sim/rewrite.py, which turns
// `device T*` into ::mlxsim::Ptr<T, AS_DEVICE> and `threadgroup T a[N];` into a handle on
// per-threadgroup storage. Every barrier and collective takes the caller's source location
// (a defaulted std::source_location argument) to tell call sites apart.
#pragma once

#include "mlxsim_core.h"
#include "msl_math.h"
#include "msl_types.h"
#if __has_include("mlx_utils.h")
#include "mlx_utils.h"
#endif

#include "msl_constants.h"  // FLT_MAX, HALF_MAX, M_PI_F, INFINITY... as metal_stdlib defines them

#ifndef METAL_FUNC
#define METAL_FUNC inline __attribute__((always_inline))
#endif

namespace metal {
template <class T>
struct atomic;
}  // namespace metal

namespace mlxsim {

template <class T>
inline constexpr bool is_atomic_cell<::metal::atomic<T>> = true;

// The MSL value types a thread pointer may view as one another (PtrOnly).
template <>
struct plain_value<half> : std::true_type {};
template <>
struct plain_value<bfloat> : std::true_type {};
template <class T, int N>
struct plain_value<::metal::vec<T, N>> : plain_value<T> {};
template <class T, int N>
struct plain_value<::metal::packed_vec<T, N>> : plain_value<T> {};

// ---------------------------------------------------------------- thread attributes

inline metal::vec<uint, 3> u3(const uint32_t* v) { return metal::vec<uint, 3>(v[0], v[1], v[2]); }

#define MLXSIM_ATTR3(name) \
  inline metal::vec<uint, 3> attr_##name(const ThreadAttrs& a) { return u3(a.name); }
#define MLXSIM_ATTR1(name) \
  inline uint attr_##name(const ThreadAttrs& a) { return a.name; }
MLXSIM_ATTR3(thread_position_in_grid)
MLXSIM_ATTR3(thread_position_in_threadgroup)
MLXSIM_ATTR3(threadgroup_position_in_grid)
MLXSIM_ATTR3(threads_per_threadgroup)
MLXSIM_ATTR3(dispatch_threads_per_threadgroup)
MLXSIM_ATTR3(threadgroups_per_grid)
MLXSIM_ATTR3(threads_per_grid)
MLXSIM_ATTR1(thread_index_in_threadgroup)
MLXSIM_ATTR1(thread_index_in_simdgroup)
MLXSIM_ATTR1(simdgroup_index_in_threadgroup)
MLXSIM_ATTR1(simdgroups_per_threadgroup)
MLXSIM_ATTR1(dispatch_simdgroups_per_threadgroup)
MLXSIM_ATTR1(thread_index_in_quadgroup)
MLXSIM_ATTR1(quadgroup_index_in_threadgroup)
MLXSIM_ATTR1(quadgroups_per_threadgroup)
MLXSIM_ATTR1(dispatch_quadgroups_per_threadgroup)
#undef MLXSIM_ATTR3
#undef MLXSIM_ATTR1
inline metal::vec<uint, 3> attr_grid_size(const ThreadAttrs& a) { return u3(a.threads_per_grid); }
inline metal::vec<uint, 3> attr_grid_origin(const ThreadAttrs&) { return metal::vec<uint, 3>(0u, 0u, 0u); }
inline uint attr_thread_execution_width(const ThreadAttrs&) { return kSimdWidth; }
inline uint attr_threads_per_simdgroup(const ThreadAttrs&) { return kSimdWidth; }

}  // namespace mlxsim

// ================================================================ MSL names

namespace metal {

// ---------------------------------------------------------------- barriers

enum class mem_flags : uint { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4,
                              mem_threadgroup_imageblock = 8, mem_object_data = 16 };
constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(uint(a) | uint(b)); }
constexpr mem_flags operator&(mem_flags a, mem_flags b) { return mem_flags(uint(a) & uint(b)); }

enum class thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup,
                          thread_scope_device };
using enum thread_scope;

// Lanes of a threadgroup run on one OS thread and switch only here, so no fence is needed.
inline void threadgroup_barrier(mem_flags f, const mlxsim::SrcLoc& loc = mlxsim::SrcLoc::current()) {
  mlxsim::threadgroup_barrier_wait(mlxsim::site_of(loc), uint(f));
}
inline void simdgroup_barrier(mem_flags, const mlxsim::SrcLoc& loc = mlxsim::SrcLoc::current()) {
  mlxsim::collective<int>(0, loc, [](mlxsim::Exchange*) {});
}

// ---------------------------------------------------------------- atomics

enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel,
                    memory_order_seq_cst };

namespace sim_detail {
struct cell;
}

template <class T>
class atomic {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || std::is_same_v<T, bool>, "MSL atomics are 32- or 64-bit");
  T value_;  // private: kernel code reaches it only through the atomic_* functions
  friend struct sim_detail::cell;
};
using atomic_int = atomic<int>;
using atomic_uint = atomic<uint>;
using atomic_bool = atomic<bool>;
using atomic_float = atomic<float>;
using atomic_ulong = atomic<ulong>;

inline void atomic_thread_fence(mem_flags, memory_order, thread_scope = thread_scope_device) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

namespace sim_detail {
template <class T>
using bits_t = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint8_t>>;

// The only code that touches an atomic's value: each operation is atomic, and a store after the
// same thread's load is reported to the runtime (a read-modify-write split in two).
struct cell {
  // Read-modify-write as a compare-exchange loop on the bits: works for float as for ints.
  template <class T, class F>
  static T rmw(atomic<T>* obj, F f) {
    auto* word = bits(obj);
    auto old = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
      T cur = __builtin_bit_cast(T, old);
      auto next = __builtin_bit_cast(bits_t<T>, T(f(cur)));
      if (__atomic_compare_exchange_n(word, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return cur;
    }
  }
  template <class T>
  static T load(atomic<T>* a) {
    ::mlxsim::atomic_loaded(a);
    return __builtin_bit_cast(T, __atomic_load_n(bits(a), __ATOMIC_SEQ_CST));
  }
  template <class T>
  static void store(atomic<T>* a, T desired) {
    ::mlxsim::atomic_stored(a);
    __atomic_store_n(bits(a), __builtin_bit_cast(bits_t<T>, desired), __ATOMIC_SEQ_CST);
  }
  template <class T>
  static bool compare_exchange(atomic<T>* a, T* expected, T desired) {
    auto want = __builtin_bit_cast(bits_t<T>, *expected);
    bool ok = __atomic_compare_exchange_n(bits(a), &want, __builtin_bit_cast(bits_t<T>, desired), false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    if (!ok) *expected = __builtin_bit_cast(T, want);
    return ok;
  }

 private:
  template <class T>
  static bits_t<T>* bits(atomic<T>* a) {
    return reinterpret_cast<bits_t<T>*>(&a->value_);
  }
};
template <class A>
A* raw(A* p) {
  return p;
}
template <class A, int AS>
A* raw(const mlxsim::Ptr<A, AS>& p) {
  return &*p;
}
template <class A>
struct atomic_value;
template <class T>
struct atomic_value<atomic<T>> {
  using type = T;
};
template <class P>
using atomic_value_t = typename atomic_value<std::remove_cv_t<std::remove_pointer_t<decltype(raw(std::declval<P>()))>>>::type;
template <class T, class P>
atomic<T>* cell_of(P obj) {
  return const_cast<atomic<T>*>(raw(obj));
}
}  // namespace sim_detail

#define MLXSIM_ATOMIC_RMW(name, expr)                                                              \
  template <class P, class U, class T = sim_detail::atomic_value_t<P>>                             \
  T atomic_fetch_##name##_explicit(P obj, U operand, memory_order = memory_order_relaxed) {        \
    T v = T(operand);                                                                              \
    return sim_detail::cell::rmw(sim_detail::cell_of<T>(obj), [v](T a) { return expr; });          \
  }
MLXSIM_ATOMIC_RMW(add, a + v)
MLXSIM_ATOMIC_RMW(sub, a - v)
MLXSIM_ATOMIC_RMW(and, a & v)
MLXSIM_ATOMIC_RMW(or, a | v)
MLXSIM_ATOMIC_RMW(xor, a ^ v)
MLXSIM_ATOMIC_RMW(min, a < v ? a : v)
MLXSIM_ATOMIC_RMW(max, a > v ? a : v)
#undef MLXSIM_ATOMIC_RMW

template <class P, class T = sim_detail::atomic_value_t<P>>
T atomic_load_explicit(P obj, memory_order = memory_order_relaxed) {
  return sim_detail::cell::load(sim_detail::cell_of<T>(obj));
}
template <class P, class U, class T = sim_detail::atomic_value_t<P>>
void atomic_store_explicit(P obj, U desired, memory_order = memory_order_relaxed) {
  sim_detail::cell::store(sim_detail::cell_of<T>(obj), T(desired));
}
template <class P, class U, class T = sim_detail::atomic_value_t<P>>
T atomic_exchange_explicit(P obj, U desired, memory_order = memory_order_relaxed) {
  T v = T(desired);
  return sim_detail::cell::rmw(sim_detail::cell_of<T>(obj), [v](T) { return v; });
}
template <class P, class E, class U, class T = sim_detail::atomic_value_t<P>>
bool atomic_compare_exchange_weak_explicit(P obj, E expected, U desired, memory_order = memory_order_relaxed,
                                           memory_order = memory_order_relaxed) {
  return sim_detail::cell::compare_exchange(sim_detail::cell_of<T>(obj), &*expected, T(desired));
}
template <class P, class E, class U>
bool atomic_compare_exchange_strong_explicit(P obj, E expected, U desired, memory_order s = memory_order_relaxed,
                                             memory_order f = memory_order_relaxed) {
  return atomic_compare_exchange_weak_explicit(obj, expected, desired, s, f);
}

// ---------------------------------------------------------------- SIMD-group and quad-group functions

struct simd_vote {
  using vote_t = uint64_t;
  vote_t v_ = 0;
  constexpr simd_vote() = default;
  explicit constexpr simd_vote(vote_t v) : v_(v) {}
  explicit constexpr operator vote_t() const { return v_; }
  constexpr bool all() const { return (v_ & 0xFFFFFFFFull) == 0xFFFFFFFFull; }
  constexpr bool any() const { return v_ != 0; }
};
struct quad_vote {
  using vote_t = uint16_t;
  vote_t v_ = 0;
  constexpr quad_vote() = default;
  explicit constexpr quad_vote(vote_t v) : v_(v) {}
  explicit constexpr operator vote_t() const { return v_; }
  constexpr bool all() const { return (v_ & 0xF) == 0xF; }
  constexpr bool any() const { return v_ != 0; }
};

#define MLXSIM_LOC const ::mlxsim::SrcLoc &loc = ::mlxsim::SrcLoc::current()

#define MLXSIM_GROUP_FUNCTIONS(P, W, VOTE)                                                                \
  template <class T>                                                                                     \
  T P##sum(T v, MLXSIM_LOC) {                                                                            \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return a + b; }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##product(T v, MLXSIM_LOC) {                                                                        \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return a * b; }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##min(T v, MLXSIM_LOC) {                                                                            \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return ::metal::min(a, b); }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##max(T v, MLXSIM_LOC) {                                                                            \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return ::metal::max(a, b); }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##and(T v, MLXSIM_LOC) {                                                                            \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return a & b; }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##or(T v, MLXSIM_LOC) {                                                                             \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return a | b; }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##xor(T v, MLXSIM_LOC) {                                                                            \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::reduce<W, T>(ex, [](T a, T b) { return a ^ b; }); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##prefix_inclusive_sum(T v, MLXSIM_LOC) {                                                           \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::scan<W, T>(ex, [](T a, T b) { return a + b; }, true, T(0)); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##prefix_exclusive_sum(T v, MLXSIM_LOC) {                                                           \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::scan<W, T>(ex, [](T a, T b) { return a + b; }, false, T(0)); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##prefix_inclusive_product(T v, MLXSIM_LOC) {                                                       \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::scan<W, T>(ex, [](T a, T b) { return a * b; }, true, T(1)); }); \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##prefix_exclusive_product(T v, MLXSIM_LOC) {                                                       \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) { ::mlxsim::scan<W, T>(ex, [](T a, T b) { return a * b; }, false, T(1)); }); \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle(T v, I lane, MLXSIM_LOC) {                                                                \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(lane)}, loc, [](auto* ex) {           \
      ::mlxsim::permute<W, T>(ex, [](int64_t, int64_t a) { return a; }); });                             \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##broadcast(T v, I lane, MLXSIM_LOC) {                                                              \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(lane)}, loc, [](auto* ex) {           \
      ::mlxsim::permute<W, T>(ex, [](int64_t, int64_t a) { return a; }); });                             \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_up(T v, I delta, MLXSIM_LOC) {                                                            \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(delta)}, loc, [](auto* ex) {          \
      ::mlxsim::permute<W, T>(ex, [](int64_t i, int64_t d) { return i - d; }); });                       \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_down(T v, I delta, MLXSIM_LOC) {                                                          \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(delta)}, loc, [](auto* ex) {          \
      ::mlxsim::permute<W, T>(ex, [](int64_t i, int64_t d) { return i + d < int64_t(W) ? i + d : -1; }); }); \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_xor(T v, I mask, MLXSIM_LOC) {                                                            \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(mask)}, loc, [](auto* ex) {           \
      ::mlxsim::permute<W, T>(ex, [](int64_t i, int64_t m) { return (i ^ m) & int64_t(W - 1); }); });    \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_rotate_up(T v, I delta, MLXSIM_LOC) {                                                     \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(delta)}, loc, [](auto* ex) {          \
      ::mlxsim::permute<W, T>(ex, [](int64_t i, int64_t d) { return ((i - d) % int64_t(W) + int64_t(W)) % int64_t(W); }); }); \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_rotate_down(T v, I delta, MLXSIM_LOC) {                                                   \
    return ::mlxsim::collective<T>(::mlxsim::WithArg<T>{v, int64_t(delta)}, loc, [](auto* ex) {          \
      ::mlxsim::permute<W, T>(ex, [](int64_t i, int64_t d) { return (i + d) % int64_t(W); }); });        \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_and_fill_up(T data, T filling, I delta, MLXSIM_LOC) {                                     \
    return ::mlxsim::collective<T>(::mlxsim::Fill<T>{data, filling, int64_t(delta), 0}, loc,             \
                                   [](auto* ex) { ::mlxsim::fill_shift<W, T>(ex, true); });              \
  }                                                                                                      \
  template <class T, class I, class M>                                                                   \
  T P##shuffle_and_fill_up(T data, T filling, I delta, M modulo, MLXSIM_LOC) {                           \
    return ::mlxsim::collective<T>(::mlxsim::Fill<T>{data, filling, int64_t(delta), int64_t(modulo)}, loc, \
                                   [](auto* ex) { ::mlxsim::fill_shift<W, T>(ex, true); });              \
  }                                                                                                      \
  template <class T, class I>                                                                            \
  T P##shuffle_and_fill_down(T data, T filling, I delta, MLXSIM_LOC) {                                   \
    return ::mlxsim::collective<T>(::mlxsim::Fill<T>{data, filling, int64_t(delta), 0}, loc,             \
                                   [](auto* ex) { ::mlxsim::fill_shift<W, T>(ex, false); });             \
  }                                                                                                      \
  template <class T, class I, class M>                                                                   \
  T P##shuffle_and_fill_down(T data, T filling, I delta, M modulo, MLXSIM_LOC) {                         \
    return ::mlxsim::collective<T>(::mlxsim::Fill<T>{data, filling, int64_t(delta), int64_t(modulo)}, loc, \
                                   [](auto* ex) { ::mlxsim::fill_shift<W, T>(ex, false); });             \
  }                                                                                                      \
  template <class T>                                                                                     \
  T P##broadcast_first(T v, MLXSIM_LOC) {                                                                \
    return ::mlxsim::collective<T>(v, loc, [](auto* ex) {                                                \
      for (uint32_t base = 0; base < ::mlxsim::kSimdWidth; base += W) {                                  \
        uint32_t first = base;                                                                           \
        while (first < base + W && !::mlxsim::active(ex, first)) ++first;                                \
        for (uint32_t j = first; j < base + W; ++j)                                                      \
          if (::mlxsim::active(ex, j)) ::mlxsim::out_of<T>(ex, j) = ::mlxsim::in_of<T>(ex, first);       \
      } });                                                                                              \
  }                                                                                                      \
  inline VOTE P##ballot(bool b, MLXSIM_LOC) {                                                            \
    return ::mlxsim::collective<VOTE>(b, loc, [](auto* ex) {                                             \
      for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)                                                \
        if (::mlxsim::active(ex, j))                                                                     \
          ::mlxsim::out_of<VOTE>(ex, j) = VOTE(VOTE::vote_t(::mlxsim::segment_bits<W>(ex, j, ::mlxsim::pick_true))); \
    });                                                                                                  \
  }                                                                                                      \
  inline VOTE P##active_threads_mask(MLXSIM_LOC) {                                                       \
    return ::mlxsim::collective<VOTE>(true, loc, [](auto* ex) {                                          \
      for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)                                                \
        if (::mlxsim::active(ex, j))                                                                     \
          ::mlxsim::out_of<VOTE>(ex, j) = VOTE(VOTE::vote_t(::mlxsim::segment_bits<W>(ex, j, ::mlxsim::pick_any))); \
    });                                                                                                  \
  }                                                                                                      \
  inline bool P##all(bool b, MLXSIM_LOC) {                                                               \
    return ::mlxsim::collective<bool>(b, loc, [](auto* ex) {                                             \
      for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)                                                \
        if (::mlxsim::active(ex, j))                                                                     \
          ::mlxsim::out_of<bool>(ex, j) = ::mlxsim::segment_bits<W>(ex, j, ::mlxsim::pick_true) ==       \
                                          ::mlxsim::segment_bits<W>(ex, j, ::mlxsim::pick_any);          \
    });                                                                                                  \
  }                                                                                                      \
  inline bool P##any(bool b, MLXSIM_LOC) {                                                               \
    return ::mlxsim::collective<bool>(b, loc, [](auto* ex) {                                             \
      for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)                                                \
        if (::mlxsim::active(ex, j))                                                                     \
          ::mlxsim::out_of<bool>(ex, j) = ::mlxsim::segment_bits<W>(ex, j, ::mlxsim::pick_true) != 0;    \
    });                                                                                                  \
  }                                                                                                      \
  inline bool P##is_first(MLXSIM_LOC) {                                                                  \
    return ::mlxsim::collective<bool>(true, loc, [](auto* ex) {                                          \
      for (uint32_t base = 0; base < ::mlxsim::kSimdWidth; base += W) {                                  \
        bool seen = false;                                                                               \
        for (uint32_t j = base; j < base + W; ++j)                                                       \
          if (::mlxsim::active(ex, j)) {                                                                 \
            ::mlxsim::out_of<bool>(ex, j) = !seen;                                                       \
            seen = true;                                                                                 \
          }                                                                                              \
      } });                                                                                              \
  }

MLXSIM_GROUP_FUNCTIONS(simd_, 32u, simd_vote)
MLXSIM_GROUP_FUNCTIONS(quad_, 4u, quad_vote)
#undef MLXSIM_GROUP_FUNCTIONS

// ---------------------------------------------------------------- simdgroup_matrix

// Distributed as on the GPU: each lane holds two elements, (row, col) and (row, col + 1),
// at the positions Apple GPUs use (the layout MLX's steel kernels rely on through
// thread_elements()). Whole-matrix operations gather the 32 fragments.
template <class T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "simdgroup_matrix is 8x8 only");
  vec<T, 2> elems_;

  simdgroup_matrix() = default;
  explicit simdgroup_matrix(T diagonal) {
    auto [r, c] = fragment(::mlxsim::current_simd_lane());
    elems_[0] = r == c ? diagonal : T(0);
    elems_[1] = r == c + 1 ? diagonal : T(0);
  }
  vec<T, 2>& thread_elements() { return elems_; }
  const vec<T, 2>& thread_elements() const { return elems_; }

  struct Frag {
    uint32_t row, col;
  };
  static constexpr Frag fragment(uint32_t lane) {
    uint32_t q = lane / 4;
    return {(q & 4) + (lane / 2) % 4, (q & 2) * 2 + (lane % 2) * 2};
  }
};
using simdgroup_float8x8 = simdgroup_matrix<float, 8, 8>;
using simdgroup_half8x8 = simdgroup_matrix<half, 8, 8>;
using simdgroup_bfloat8x8 = simdgroup_matrix<bfloat, 8, 8>;

template <class T, int C, int R>
simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T value) {
  simdgroup_matrix<T, C, R> m;
  m.elems_[0] = value;
  m.elems_[1] = value;
  return m;
}

namespace sim_detail {
inline void require_full_simdgroup(const ::mlxsim::Exchange* ex, const char* what) {
  if (ex->mask != 0xFFFFFFFFu) {
    ::mlxsim::fault(what);
  }
}

template <class M, class P>
struct MatrixIo {
  const M* matrix;
  const P* ptr;
  uint64_t elements_per_row, origin_x, origin_y;
  bool transpose;
};

}  // namespace sim_detail

template <class T, class P, class E = uint64_t, class O = vec<uint64_t, 2>>
void simdgroup_load(simdgroup_matrix<T, 8, 8>& d, P src, E elements_per_row = 8, O origin = O(0, 0),
                    bool transpose = false, MLXSIM_LOC) {
  using M = simdgroup_matrix<T, 8, 8>;
  using Io = sim_detail::MatrixIo<M, P>;
  Io io{nullptr, &src, uint64_t(elements_per_row), uint64_t(origin.x), uint64_t(origin.y), transpose};
  d = ::mlxsim::collective<M>(io, loc, [](auto* ex) {
    sim_detail::require_full_simdgroup(ex, "simdgroup_load needs all 32 threads of the SIMD-group");
    for (uint32_t k = 0; k < 32; ++k) {
      const Io& a = ::mlxsim::in_of<Io>(ex, k);
      M& out = ::mlxsim::out_of<M>(ex, k);
      auto [r, c0] = M::fragment(k);
      for (uint32_t e = 0; e < 2; ++e) {
        uint64_t c = c0 + e;
        uint64_t idx = a.transpose ? (a.origin_y + c) * a.elements_per_row + a.origin_x + r
                                   : (a.origin_y + r) * a.elements_per_row + a.origin_x + c;
        out.elems_[int(e)] = T((*a.ptr)[idx]);
      }
    }
  });
}

template <class T, class P, class E = uint64_t, class O = vec<uint64_t, 2>>
void simdgroup_store(const simdgroup_matrix<T, 8, 8>& m, P dst, E elements_per_row = 8, O origin = O(0, 0),
                     bool transpose = false, MLXSIM_LOC) {
  using M = simdgroup_matrix<T, 8, 8>;
  using Io = sim_detail::MatrixIo<M, P>;
  Io io{&m, &dst, uint64_t(elements_per_row), uint64_t(origin.x), uint64_t(origin.y), transpose};
  ::mlxsim::collective<int>(io, loc, [](auto* ex) {
    sim_detail::require_full_simdgroup(ex, "simdgroup_store needs all 32 threads of the SIMD-group");
    for (uint32_t k = 0; k < 32; ++k) {
      const Io& a = ::mlxsim::in_of<Io>(ex, k);
      auto [r, c0] = M::fragment(k);
      for (uint32_t e = 0; e < 2; ++e) {
        uint64_t c = c0 + e;
        uint64_t idx = a.transpose ? (a.origin_y + c) * a.elements_per_row + a.origin_x + r
                                   : (a.origin_y + r) * a.elements_per_row + a.origin_x + c;
        using Elem = std::remove_reference_t<decltype((*a.ptr)[idx])>;
        (*a.ptr)[idx] = Elem(a.matrix->elems_[int(e)]);
      }
    }
  });
}

template <class TD, class TA, class TB, class TC>
void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                                   const simdgroup_matrix<TB, 8, 8>& b,
                                   const simdgroup_matrix<TC, 8, 8>& c, MLXSIM_LOC) {
  struct Ops {
    const simdgroup_matrix<TA, 8, 8>* a;
    const simdgroup_matrix<TB, 8, 8>* b;
    const simdgroup_matrix<TC, 8, 8>* c;
  };
  using MD = simdgroup_matrix<TD, 8, 8>;
  d = ::mlxsim::collective<MD>(Ops{&a, &b, &c}, loc, [](auto* ex) {
    sim_detail::require_full_simdgroup(ex, "simdgroup_multiply_accumulate needs all 32 threads of the SIMD-group");
    float A[8][8], B[8][8], C[8][8];
    for (uint32_t k = 0; k < 32; ++k) {
      const Ops& o = ::mlxsim::in_of<Ops>(ex, k);
      auto [r, c0] = MD::fragment(k);
      for (int e = 0; e < 2; ++e) {
        A[r][c0 + e] = float(o.a->elems_[e]);
        B[r][c0 + e] = float(o.b->elems_[e]);
        C[r][c0 + e] = o.c ? float(o.c->elems_[e]) : 0.0f;
      }
    }
    for (uint32_t k = 0; k < 32; ++k) {
      auto [r, c0] = MD::fragment(k);
      MD& out = ::mlxsim::out_of<MD>(ex, k);
      for (int e = 0; e < 2; ++e) {
        float acc = C[r][c0 + e];
        for (int i = 0; i < 8; ++i) acc = __builtin_fmaf(A[r][i], B[i][c0 + e], acc);
        out.elems_[e] = TD(acc);
      }
    }
  });
}

template <class TD, class TA, class TB>
void simdgroup_multiply(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                        const simdgroup_matrix<TB, 8, 8>& b, MLXSIM_LOC) {
  auto zero = make_filled_simdgroup_matrix<TD, 8, 8>(TD(0));
  simdgroup_multiply_accumulate(d, a, b, zero, loc);
}

#undef MLXSIM_LOC

}  // namespace metal

using namespace metal;
