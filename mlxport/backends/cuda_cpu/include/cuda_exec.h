// The execution half of CUDA for mlxport's CPU executor: thread and block indices, barriers,
// warp shuffles and votes, atomics, shared memory, fences and cooperative groups, on the Metal
// simulator's runtime (a block is a threadgroup whose threads run as fibers; a warp is a 32-lane
// SIMD group). The value half (vector types, half, bfloat16, math) is cuda_values.h.
//
// Kernel text reaches this header through mlxport/backends/cuda_cpu/rewrite.py, which keeps the
// device code of a .cu file, turns every pointer type into ::cusim::ptr<T> (checked against the
// buffer it points into, like the simulator's MSL pointers) and every __shared__ declaration into
// a handle on the block's storage. Every barrier and collective takes the caller's source
// location to tell call sites apart.
#pragma once

#include "cuda_values.h"
#include "mlxsim_core.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __inline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __constant__
#define __managed__
#define __grid_constant__
#define __CUDACC__ 1
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 800
#endif
#define warpSize 32

// Device code may copy and clear bytes; no C library is linked into a kernel.
#define memcpy(d, s, n) __builtin_memcpy((d), (s), (n))
#define memset(d, c, n) __builtin_memset((d), (c), (n))

// What <sys/types.h> gives CUDA code on Linux (system headers are left out of the kernel's text).
using uint = unsigned int;
using ushort = unsigned short;
using ulong = unsigned long;

// Host API types that declarations kept with device code may name; nothing host-side runs.
using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;
using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;

namespace cusim {

template <class T>
using ptr = ::mlxsim::Ptr<T, ::mlxsim::AS_GENERIC>;
using SrcLoc = ::mlxsim::SrcLoc;

inline const ::mlxsim::ThreadAttrs& attrs() { return *::mlxsim::current_attrs(); }
inline uint3 u3(const uint32_t* v) { return make_uint3(v[0], v[1], v[2]); }
inline uint3 thread_idx() { return u3(attrs().thread_position_in_threadgroup); }
inline uint3 block_idx() { return u3(attrs().threadgroup_position_in_grid); }
inline dim3 block_dim() { return dim3(u3(attrs().threads_per_threadgroup)); }
inline dim3 grid_dim() { return dim3(u3(attrs().threadgroups_per_grid)); }
inline unsigned lane() { return attrs().thread_index_in_simdgroup; }
inline unsigned linear_tid() { return attrs().thread_index_in_threadgroup; }
inline unsigned block_threads() {
  const uint32_t* d = attrs().threads_per_threadgroup;
  return d[0] * d[1] * d[2];
}

// __shared__ T name[D0][D1]...; and __shared__ T name; (slots number the declarations of a file)
template <class T, size_t... D>
auto shared_array(int slot, const char* name) {
  return ::mlxsim::tg_array_in<::mlxsim::AS_GENERIC, T, D...>(slot, name);
}
template <class T>
T& shared_scalar(int slot, const char* name) {
  return *::mlxsim::tg_scalar<T>(slot, name);
}
// extern __shared__ T name[]; every such declaration aliases the launch's dynamic shared memory
template <class T>
ptr<T> dynamic_shared() {
  const ::mlxsim::Buffer* buf;
  void* p = ::mlxsim::dynamic_threadgroup_memory(&buf);
  return ptr<T>(static_cast<T*>(p), buf);
}

// A kernel argument bound from a launch buffer: a checked pointer into it, or the value it holds.
template <class P>
inline constexpr bool is_checked_ptr = false;
template <class T, int AS>
inline constexpr bool is_checked_ptr<::mlxsim::Ptr<T, AS>> = true;

struct Arg {
  const ::mlxsim::Buffer* b;
  template <class P>
  operator P() const {
    if constexpr (is_checked_ptr<P>) return P(b);
    else if constexpr (std::is_pointer_v<P>) return reinterpret_cast<P>(b->data);
    else return *reinterpret_cast<const P*>(b->data);
  }
};

// A data member of a struct the kernel takes by value, bound from a launch buffer of its own: a
// checked pointer into it, or the bytes of its value.
template <class F>
void bind(F& field, const ::mlxsim::Buffer* b) {
  if constexpr (is_checked_ptr<F>) field = F(b);
  else if (b->bytes == 0) __builtin_memset(static_cast<void*>(&field), 0, sizeof(F));  // unbound
  else if (b->bytes < int64_t(sizeof(F))) ::mlxsim::fault("a struct member is bound to fewer bytes than its type has");
  else __builtin_memcpy(static_cast<void*>(&field), b->data, sizeof(F));
}

// A __constant__ array the host fills at run time (cudaMemcpyToSymbol), filled before the launch
// from a buffer of doubles, each converted to the array's element type; elements past the buffer's
// are zero.
template <class A>
void fill_constant(A& symbol, const ::mlxsim::Buffer* b) {
  using E = std::remove_all_extents_t<A>;
  E* out = reinterpret_cast<E*>(&symbol);
  const double* in = reinterpret_cast<const double*>(b->data);
  const size_t given = size_t(b->bytes) / sizeof(double);
  for (size_t i = 0; i < sizeof(A) / sizeof(E); ++i) {
    const double x = i < given ? in[i] : 0.0;
    if constexpr (std::is_arithmetic_v<E>) out[i] = static_cast<E>(x);
    else out[i] = E(float(x));
  }
}

// Marks an output element accessed atomically, so two blocks updating it is not a race.
inline void mark_atomic(const void* addr) {
  const ::mlxsim::Buffer* buf = ::mlxsim::find_buffer(addr);
  if (!buf || !buf->mask) return;
  int64_t e = (static_cast<const char*>(addr) - buf->base) / buf->elem_size;
  __atomic_store_n(&buf->mask[e], ::mlxsim::kAtomicTag, __ATOMIC_RELAXED);
}

template <class T>
using bits_t = std::conditional_t<sizeof(T) == 8, uint64_t,
                                  std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;

// Read-modify-write as a compare-exchange loop on the bits: floats, halves and ints alike.
template <class T, class F>
T atomic_rmw(T* addr, F f) {
  mark_atomic(addr);
  using B = bits_t<T>;
  auto* word = reinterpret_cast<B*>(addr);
  B old = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    T cur = __builtin_bit_cast(T, old);
    B next = __builtin_bit_cast(B, T(f(cur)));
    if (__atomic_compare_exchange_n(word, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
      ::mlxsim::atomic_done(addr);
      return cur;
    }
  }
}

// An atomic through a checked pointer: the access is bounds checked first.
template <class T>
T* checked(ptr<T> p) {
  return &p[0];
}

// ---------------------------------------------------------------- warp collectives

template <class T>
struct Shuffle {
  T value;
  int64_t arg;
  int64_t width;
};

enum class Move { Index, Up, Down, Xor };

// Each participant reads the value of a source lane within its segment of `width` lanes; a source
// outside the segment (or not taking part) leaves the lane its own value, as CUDA specifies.
template <Move M, class T>
void shuffle(::mlxsim::Exchange* ex) {
  using ::mlxsim::active;
  using ::mlxsim::in_of;
  using ::mlxsim::out_of;
  for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j) {
    if (!active(ex, j)) continue;
    const auto& me = in_of<Shuffle<T>>(ex, j);
    const int64_t w = me.width > 0 && me.width <= 32 ? me.width : 32;
    const int64_t base = int64_t(j) - int64_t(j) % w;
    int64_t s = -1;
    if constexpr (M == Move::Index) s = base + ((me.arg % w) + w) % w;
    if constexpr (M == Move::Up) s = int64_t(j) - me.arg >= base ? int64_t(j) - me.arg : -1;
    if constexpr (M == Move::Down) s = int64_t(j) + me.arg < base + w ? int64_t(j) + me.arg : -1;
    if constexpr (M == Move::Xor) s = (int64_t(j) ^ me.arg) < base + w ? int64_t(j) ^ me.arg : -1;
    bool ok = s >= 0 && s < 32 && active(ex, uint32_t(s));
    out_of<T>(ex, j) = ok ? in_of<Shuffle<T>>(ex, uint32_t(s)).value : me.value;
  }
}

template <Move M, class T>
T shfl(T v, int64_t arg, int width, const SrcLoc& loc) {
  return ::mlxsim::collective<T>(Shuffle<T>{v, arg, width}, loc, [](auto* ex) { shuffle<M, T>(ex); });
}

struct Vote {
  bool pred;
  unsigned mask;
};

// Bits of the participating lanes (within `mask`) whose predicate holds; `all_of` instead: which
// participants there are.
inline unsigned vote(::mlxsim::Exchange* ex, uint32_t j, bool all_of) {
  const unsigned mask = ::mlxsim::in_of<Vote>(ex, j).mask;
  unsigned bits = 0;
  for (uint32_t k = 0; k < ::mlxsim::kSimdWidth; ++k)
    if (::mlxsim::active(ex, k) && ((mask >> k) & 1u) && (all_of || ::mlxsim::in_of<Vote>(ex, k).pred))
      bits |= 1u << k;
  return bits;
}

// __reduce_*_sync: every participant gets the reduction over the participants within `mask`.
template <class T, class Op>
T warp_reduce(unsigned mask, T v, Op op, const SrcLoc& loc) {
  return ::mlxsim::collective<T>(Shuffle<T>{v, int64_t(mask), 32}, loc, [op](auto* ex) {
    bool have = false;
    T acc{};
    for (uint32_t k = 0; k < ::mlxsim::kSimdWidth; ++k) {
      const auto& in = ::mlxsim::in_of<Shuffle<T>>(ex, k);
      if (::mlxsim::active(ex, k) && ((unsigned(in.arg) >> k) & 1u)) {
        acc = have ? T(op(acc, in.value)) : in.value;
        have = true;
      }
    }
    for (uint32_t k = 0; k < ::mlxsim::kSimdWidth; ++k)
      if (::mlxsim::active(ex, k)) ::mlxsim::out_of<T>(ex, k) = acc;
  });
}

// Slot 0 of a block's storage is the executor's own; rewrite.py numbers __shared__ declarations from 1.
constexpr int kInternalSlot = 0;

}  // namespace cusim

#define CUSIM_LOC const ::cusim::SrcLoc &loc = ::cusim::SrcLoc::current()

#define threadIdx (::cusim::thread_idx())
#define blockIdx (::cusim::block_idx())
#define blockDim (::cusim::block_dim())
#define gridDim (::cusim::grid_dim())

// ---------------------------------------------------------------- barriers and fences

inline void __syncthreads(CUSIM_LOC) { ::mlxsim::threadgroup_barrier_wait(::mlxsim::site_of(loc)); }

// Block-wide counts through the block's storage: four barriers so that no thread's count is lost
// to, or left over for, another call.
inline int cusim_block_count(int pred, const ::cusim::SrcLoc& loc) {
  int& count = ::cusim::shared_scalar<int>(::cusim::kInternalSlot, "__syncthreads_count");
  __syncthreads(loc);
  if (::cusim::linear_tid() == 0) count = 0;
  __syncthreads(loc);
  if (pred) ++count;
  __syncthreads(loc);
  int total = count;
  __syncthreads(loc);
  return total;
}
inline int __syncthreads_count(int pred, CUSIM_LOC) { return cusim_block_count(pred != 0, loc); }
inline int __syncthreads_and(int pred, CUSIM_LOC) {
  return cusim_block_count(pred != 0, loc) == int(::cusim::block_threads());
}
inline int __syncthreads_or(int pred, CUSIM_LOC) { return cusim_block_count(pred != 0, loc) > 0; }

inline void __syncwarp(unsigned = 0xFFFFFFFFu, CUSIM_LOC) { ::mlxsim::collective<int>(0, loc, [](auto*) {}); }

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

inline long long clock64() {
  static thread_local long long ticks = 0;
  return ticks += 1000;
}
inline long clock() { return long(clock64()); }
inline void __nanosleep(unsigned) {}
inline unsigned __laneid() { return ::cusim::lane(); }

// ---------------------------------------------------------------- warp shuffles and votes

template <class T>
T __shfl_sync(unsigned, T var, int src_lane, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Index>(var, src_lane, width, loc);
}
template <class T>
T __shfl_up_sync(unsigned, T var, unsigned delta, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Up>(var, int64_t(delta), width, loc);
}
template <class T>
T __shfl_down_sync(unsigned, T var, unsigned delta, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Down>(var, int64_t(delta), width, loc);
}
template <class T>
T __shfl_xor_sync(unsigned, T var, int lane_mask, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Xor>(var, lane_mask, width, loc);
}
// Before CUDA 9 the shuffles had no mask; some kernels still call them.
template <class T>
T __shfl(T var, int src_lane, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Index>(var, src_lane, width, loc);
}
template <class T>
T __shfl_up(T var, unsigned delta, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Up>(var, int64_t(delta), width, loc);
}
template <class T>
T __shfl_down(T var, unsigned delta, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Down>(var, int64_t(delta), width, loc);
}
template <class T>
T __shfl_xor(T var, int lane_mask, int width = 32, CUSIM_LOC) {
  return ::cusim::shfl<::cusim::Move::Xor>(var, lane_mask, width, loc);
}

inline unsigned __ballot_sync(unsigned mask, int pred, CUSIM_LOC) {
  return ::mlxsim::collective<unsigned>(::cusim::Vote{pred != 0, mask}, loc, [](auto* ex) {
    for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)
      if (::mlxsim::active(ex, j)) ::mlxsim::out_of<unsigned>(ex, j) = ::cusim::vote(ex, j, false);
  });
}
inline int __all_sync(unsigned mask, int pred, CUSIM_LOC) {
  return ::mlxsim::collective<int>(::cusim::Vote{pred != 0, mask}, loc, [](auto* ex) {
    for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)
      if (::mlxsim::active(ex, j))
        ::mlxsim::out_of<int>(ex, j) = ::cusim::vote(ex, j, false) == ::cusim::vote(ex, j, true);
  });
}
inline int __any_sync(unsigned mask, int pred, CUSIM_LOC) {
  return ::mlxsim::collective<int>(::cusim::Vote{pred != 0, mask}, loc, [](auto* ex) {
    for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)
      if (::mlxsim::active(ex, j)) ::mlxsim::out_of<int>(ex, j) = ::cusim::vote(ex, j, false) != 0;
  });
}
inline unsigned __activemask(CUSIM_LOC) {
  return ::mlxsim::collective<unsigned>(::cusim::Vote{true, 0xFFFFFFFFu}, loc, [](auto* ex) {
    for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j)
      if (::mlxsim::active(ex, j)) ::mlxsim::out_of<unsigned>(ex, j) = ::cusim::vote(ex, j, true);
  });
}
inline unsigned __ballot(int pred, CUSIM_LOC) { return __ballot_sync(0xFFFFFFFFu, pred, loc); }
inline int __all(int pred, CUSIM_LOC) { return __all_sync(0xFFFFFFFFu, pred, loc); }
inline int __any(int pred, CUSIM_LOC) { return __any_sync(0xFFFFFFFFu, pred, loc); }

template <class T>
unsigned __match_any_sync(unsigned mask, T value, CUSIM_LOC) {
  return ::mlxsim::collective<unsigned>(::cusim::Shuffle<T>{value, int64_t(mask), 32}, loc, [](auto* ex) {
    for (uint32_t j = 0; j < ::mlxsim::kSimdWidth; ++j) {
      if (!::mlxsim::active(ex, j)) continue;
      const auto& me = ::mlxsim::in_of<::cusim::Shuffle<T>>(ex, j);
      unsigned bits = 0;
      for (uint32_t k = 0; k < ::mlxsim::kSimdWidth; ++k)
        if (::mlxsim::active(ex, k) && ((unsigned(me.arg) >> k) & 1u) &&
            __builtin_memcmp(&::mlxsim::in_of<::cusim::Shuffle<T>>(ex, k).value, &me.value, sizeof(T)) == 0)
          bits |= 1u << k;
      ::mlxsim::out_of<unsigned>(ex, j) = bits;
    }
  });
}

#define CUSIM_WARP_REDUCE(name, T, expr)                                         \
  inline T __reduce_##name##_sync(unsigned mask, T value, CUSIM_LOC) {           \
    return ::cusim::warp_reduce<T>(mask, value, [](T a, T b) { return expr; }, loc); \
  }
CUSIM_WARP_REDUCE(add, unsigned, a + b)
CUSIM_WARP_REDUCE(add, int, a + b)
CUSIM_WARP_REDUCE(min, unsigned, a < b ? a : b)
CUSIM_WARP_REDUCE(min, int, a < b ? a : b)
CUSIM_WARP_REDUCE(max, unsigned, a > b ? a : b)
CUSIM_WARP_REDUCE(max, int, a > b ? a : b)
CUSIM_WARP_REDUCE(and, unsigned, a & b)
CUSIM_WARP_REDUCE(or, unsigned, a | b)
CUSIM_WARP_REDUCE(xor, unsigned, a ^ b)
#undef CUSIM_WARP_REDUCE

// ---------------------------------------------------------------- atomics

#define CUSIM_ATOMIC(name, expr)                                                            \
  template <class T, class V>                                                               \
  T name(T* address, V val) {                                                               \
    const T v = T(val);                                                                     \
    return ::cusim::atomic_rmw(address, [v](T old) { return expr; });                      \
  }                                                                                         \
  template <class T, class V>                                                               \
  T name(::cusim::ptr<T> address, V val) {                                                  \
    return name(::cusim::checked(address), val);                                            \
  }                                                                                         \
  template <class T, class V>                                                               \
  T name##_block(T* address, V val) {                                                       \
    return name(address, val);                                                              \
  }                                                                                         \
  template <class T, class V>                                                               \
  T name##_system(T* address, V val) {                                                      \
    return name(address, val);                                                              \
  }
CUSIM_ATOMIC(atomicAdd, old + v)
CUSIM_ATOMIC(atomicSub, old - v)
CUSIM_ATOMIC(atomicExch, v)
CUSIM_ATOMIC(atomicMin, v < old ? v : old)
CUSIM_ATOMIC(atomicMax, v > old ? v : old)
CUSIM_ATOMIC(atomicAnd, old & v)
CUSIM_ATOMIC(atomicOr, old | v)
CUSIM_ATOMIC(atomicXor, old ^ v)
CUSIM_ATOMIC(atomicInc, old >= v ? T(0) : T(old + 1))
CUSIM_ATOMIC(atomicDec, (old == 0 || old > v) ? v : T(old - 1))
#undef CUSIM_ATOMIC

template <class T, class C, class V>
T atomicCAS(T* address, C compare, V val) {
  ::cusim::mark_atomic(address);
  using B = ::cusim::bits_t<T>;
  B want = __builtin_bit_cast(B, T(compare));
  __atomic_compare_exchange_n(reinterpret_cast<B*>(address), &want, __builtin_bit_cast(B, T(val)), false,
                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  ::mlxsim::atomic_done(address);
  return __builtin_bit_cast(T, want);
}
template <class T, class C, class V>
T atomicCAS(::cusim::ptr<T> address, C compare, V val) {
  return atomicCAS(::cusim::checked(address), compare, val);
}

// ---------------------------------------------------------------- loads and stores with cache hints

#define CUSIM_LOAD(name)                                  \
  template <class T>                                      \
  T name(const T* p) {                                    \
    return *p;                                            \
  }                                                       \
  template <class T>                                      \
  T name(::cusim::ptr<const T> p) {                       \
    return p[0];                                          \
  }                                                       \
  template <class T>                                      \
  T name(::cusim::ptr<T> p) {                             \
    return p[0];                                          \
  }
CUSIM_LOAD(__ldg)
CUSIM_LOAD(__ldca)
CUSIM_LOAD(__ldcg)
CUSIM_LOAD(__ldcs)
CUSIM_LOAD(__ldlu)
CUSIM_LOAD(__ldcv)
#undef CUSIM_LOAD
#define CUSIM_STORE(name)                                 \
  template <class T>                                      \
  void name(T* p, T v) {                                  \
    *p = v;                                               \
  }                                                       \
  template <class T>                                      \
  void name(::cusim::ptr<T> p, T v) {                     \
    p[0] = v;                                             \
  }
CUSIM_STORE(__stwb)
CUSIM_STORE(__stcg)
CUSIM_STORE(__stcs)
CUSIM_STORE(__stwt)
#undef CUSIM_STORE

// ---------------------------------------------------------------- printf and assert

inline int printf(const char* format, ...) {
  __builtin_va_list args;
  __builtin_va_start(args, format);
  int n = ::mlxsim::vprint(format, args);
  __builtin_va_end(args);
  return n;
}
#define assert(e) ((e) ? (void)0 : ::mlxsim::fault("assertion failed: " #e))
#define __trap() ::mlxsim::fault("__trap() was called")
#define __brkpt() ::mlxsim::fault("__brkpt() was called")

// ---------------------------------------------------------------- cooperative groups

namespace cooperative_groups {

// Any group of a block's threads, as a parameter type: the whole block (tile 0) or a tile of W.
class thread_group {
 public:
  void sync(CUSIM_LOC) const {
    if (tile_ == 0) {
      __syncthreads(loc);
    } else {
      __syncwarp(0xFFFFFFFFu, loc);
    }
  }
  unsigned thread_rank() const { return tile_ == 0 ? ::cusim::linear_tid() : ::cusim::linear_tid() % tile_; }
  unsigned size() const { return tile_ == 0 ? ::cusim::block_threads() : tile_; }
  unsigned num_threads() const { return size(); }

 protected:
  explicit constexpr thread_group(unsigned tile) : tile_(tile) {}
  unsigned tile_;
};
inline void sync(const thread_group& g, CUSIM_LOC) { g.sync(loc); }

struct thread_block : thread_group {
  constexpr thread_block() : thread_group(0) {}
  void sync(CUSIM_LOC) const { __syncthreads(loc); }
  unsigned thread_rank() const { return ::cusim::linear_tid(); }
  unsigned size() const { return ::cusim::block_threads(); }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return dim3(blockIdx); }
  dim3 thread_index() const { return dim3(threadIdx); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
inline thread_block this_thread_block() { return {}; }
inline void sync(const thread_block& g, CUSIM_LOC) { g.sync(loc); }

// A tile of W consecutive threads of a block (W divides 32): warp collectives on segments of W.
template <unsigned W>
struct thread_block_tile : thread_group {
  static_assert(W >= 1 && W <= 32 && (W & (W - 1)) == 0, "tiles have a power-of-two size up to 32");
  constexpr thread_block_tile() : thread_group(W) {}
  unsigned thread_rank() const { return ::cusim::linear_tid() % W; }
  static constexpr unsigned size() { return W; }
  static constexpr unsigned num_threads() { return W; }
  unsigned meta_group_rank() const { return ::cusim::linear_tid() / W; }
  unsigned meta_group_size() const { return (::cusim::block_threads() + W - 1) / W; }
  void sync(CUSIM_LOC) const { __syncwarp(0xFFFFFFFFu, loc); }
  template <class T>
  T shfl(T v, int src, CUSIM_LOC) const {
    return ::cusim::shfl<::cusim::Move::Index>(v, src, int(W), loc);
  }
  template <class T>
  T shfl_up(T v, unsigned delta, CUSIM_LOC) const {
    return ::cusim::shfl<::cusim::Move::Up>(v, int64_t(delta), int(W), loc);
  }
  template <class T>
  T shfl_down(T v, unsigned delta, CUSIM_LOC) const {
    return ::cusim::shfl<::cusim::Move::Down>(v, int64_t(delta), int(W), loc);
  }
  template <class T>
  T shfl_xor(T v, int mask, CUSIM_LOC) const {
    return ::cusim::shfl<::cusim::Move::Xor>(v, mask, int(W), loc);
  }
  unsigned ballot(int pred, CUSIM_LOC) const {
    unsigned bits = __ballot_sync(0xFFFFFFFFu, pred, loc);
    return (bits >> (::cusim::lane() / W * W)) & (W == 32 ? 0xFFFFFFFFu : ((1u << W) - 1));
  }
  int any(int pred, CUSIM_LOC) const { return ballot(pred, loc) != 0; }
  int all(int pred, CUSIM_LOC) const {
    return ballot(pred, loc) == (W == 32 ? 0xFFFFFFFFu : ((1u << W) - 1));
  }
};
template <unsigned W, class Parent>
thread_block_tile<W> tiled_partition(const Parent&) {
  return {};
}
template <unsigned W>
inline void sync(const thread_block_tile<W>& g, CUSIM_LOC) {
  g.sync(loc);
}
// The tile size known only at run time: a group of that many consecutive threads.
inline thread_group tiled_partition(const thread_group& parent, unsigned size) {
  struct tile : thread_group {
    explicit constexpr tile(unsigned n) : thread_group(n) {}
  };
  if (size == 0 || size > 32 || (size & (size - 1)) != 0) ::mlxsim::fault("tiled_partition: a tile has a power-of-two size up to 32");
  (void)parent;
  return tile(size);
}

struct grid_group {
  void sync(CUSIM_LOC) const { ::mlxsim::fault("grid_group::sync needs a cooperative launch, which the executor does not run"); }
  unsigned long long thread_rank() const {
    const auto& a = ::cusim::attrs();
    return (unsigned long long)(a.threadgroup_position_in_grid[0] +
                                a.threadgroups_per_grid[0] * (a.threadgroup_position_in_grid[1] +
                                                              a.threadgroups_per_grid[1] * a.threadgroup_position_in_grid[2])) *
               ::cusim::block_threads() + ::cusim::linear_tid();
  }
  unsigned long long size() const {
    const auto& a = ::cusim::attrs();
    return (unsigned long long)a.threadgroups_per_grid[0] * a.threadgroups_per_grid[1] * a.threadgroups_per_grid[2] *
           ::cusim::block_threads();
  }
  unsigned long long num_threads() const { return size(); }
};
inline grid_group this_grid() { return {}; }

// The lanes of the warp that reach coalesced_threads() together; ranks follow lane order.
class coalesced_group {
 public:
  explicit coalesced_group(unsigned mask) : mask_(mask) {}
  unsigned thread_rank() const { return __popc(mask_ & ((1u << ::cusim::lane()) - 1u)); }
  unsigned size() const { return __popc(mask_); }
  unsigned num_threads() const { return size(); }
  void sync(CUSIM_LOC) const { __syncwarp(mask_, loc); }
  template <class T>
  T shfl(T v, unsigned src_rank, CUSIM_LOC) const {
    unsigned m = mask_;
    for (unsigned r = 0; r < src_rank % size() && m; ++r) m &= m - 1;  // drop the lowest lanes
    return __shfl_sync(mask_, v, m ? __builtin_ctz(m) : 0, 32, loc);
  }

 private:
  unsigned mask_;
};
inline coalesced_group coalesced_threads(CUSIM_LOC) { return coalesced_group(__activemask(loc)); }

template <class T>
struct plus {
  T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T>
struct less {
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T>
struct greater {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <class T>
struct bit_and {
  T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T>
struct bit_or {
  T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T>
struct bit_xor {
  T operator()(const T& a, const T& b) const { return a ^ b; }
};

// cg::reduce over a tile: a butterfly, so every thread of the tile gets the result.
template <unsigned W, class T, class Op>
T reduce(const thread_block_tile<W>& g, T value, Op op, CUSIM_LOC) {
  for (unsigned offset = W / 2; offset > 0; offset /= 2) value = op(value, g.shfl_xor(value, int(offset), loc));
  return value;
}
template <unsigned W, class T, class Op>
T inclusive_scan(const thread_block_tile<W>& g, T value, Op op, CUSIM_LOC) {
  for (unsigned offset = 1; offset < W; offset *= 2) {
    T other = g.shfl_up(value, offset, loc);
    if (g.thread_rank() >= offset) value = op(value, other);
  }
  return value;
}
template <unsigned W, class T>
T inclusive_scan(const thread_block_tile<W>& g, T value, CUSIM_LOC) {
  return inclusive_scan(g, value, plus<T>(), loc);
}
template <unsigned W, class T, class Op>
T exclusive_scan(const thread_block_tile<W>& g, T value, Op op, CUSIM_LOC) {
  T inclusive = inclusive_scan(g, value, op, loc);
  T shifted = g.shfl_up(inclusive, 1, loc);
  return g.thread_rank() == 0 ? T{} : shifted;
}
template <unsigned W, class T>
T exclusive_scan(const thread_block_tile<W>& g, T value, CUSIM_LOC) {
  return exclusive_scan(g, value, plus<T>(), loc);
}

}  // namespace cooperative_groups

#include "cuda_cub.h"
#include "cuda_libcu.h"
#include "cuda_ptx.h"
#include "torch_device.h"
