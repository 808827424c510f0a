// The part of cub (CUDA's block and warp primitives) kernels use most: BlockReduce and WarpReduce
// with their TempStorage, and the reduction functors. As in cub, every thread of the block (of the
// logical warp) calls the reduction, and the aggregate is valid in thread 0 (lane 0) only.
#pragma once

namespace cub {

struct Sum {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return a + b;
  }
};
struct Max {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};
struct Min {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return b < a ? b : a;
  }
};

enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY,
  BLOCK_REDUCE_RAKING,
  BLOCK_REDUCE_WARP_REDUCTIONS,
};

template <class T, int BLOCK_DIM_X, BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce {
 public:
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  struct TempStorage {
    T value[kThreads];
  };

  explicit BlockReduce(TempStorage& storage) : s_(storage) {}

  template <class Op>
  T Reduce(T input, Op op, int num_valid, CUSIM_LOC) {
    const unsigned t = ::cusim::linear_tid();
    if (::cusim::block_threads() != unsigned(kThreads))
      ::mlxsim::fault("cub::BlockReduce is declared for another number of threads than the block has");
    s_.value[t] = input;
    __syncthreads(loc);
    T out = input;
    if (t == 0)
      for (int i = 1; i < num_valid && i < kThreads; ++i) out = op(out, s_.value[i]);
    __syncthreads(loc);  // the storage may be used again at once
    return out;
  }
  template <class Op>
  T Reduce(T input, Op op, CUSIM_LOC) {
    return Reduce(input, op, kThreads, loc);
  }
  T Sum(T input, CUSIM_LOC) { return Reduce(input, ::cub::Sum(), kThreads, loc); }
  T Sum(T input, int num_valid, CUSIM_LOC) { return Reduce(input, ::cub::Sum(), num_valid, loc); }

 private:
  TempStorage& s_;
};

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpReduce {
  static_assert(LOGICAL_WARP_THREADS >= 1 && LOGICAL_WARP_THREADS <= 32 &&
                    (LOGICAL_WARP_THREADS & (LOGICAL_WARP_THREADS - 1)) == 0,
                "the executor's cub::WarpReduce takes a power-of-two warp up to 32 threads");

 public:
  struct TempStorage {};

  explicit WarpReduce(TempStorage&) {}

  // A tree over the logical warp's lanes below num_valid: lane 0 ends with all of them.
  template <class Op>
  T Reduce(T input, Op op, int num_valid, CUSIM_LOC) {
    const int lane = int(::cusim::lane()) % LOGICAL_WARP_THREADS;
    for (int o = LOGICAL_WARP_THREADS / 2; o > 0; o /= 2) {
      T other = ::cusim::shfl<::cusim::Move::Down>(input, o, LOGICAL_WARP_THREADS, loc);
      if (lane + o < num_valid) input = op(input, other);
    }
    return input;
  }
  template <class Op>
  T Reduce(T input, Op op, CUSIM_LOC) {
    return Reduce(input, op, LOGICAL_WARP_THREADS, loc);
  }
  T Sum(T input, CUSIM_LOC) { return Reduce(input, ::cub::Sum(), LOGICAL_WARP_THREADS, loc); }
  T Sum(T input, int num_valid, CUSIM_LOC) { return Reduce(input, ::cub::Sum(), num_valid, loc); }
};

}  // namespace cub
