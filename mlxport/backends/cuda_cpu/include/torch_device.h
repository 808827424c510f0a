// The few names PyTorch extensions use in device code, as their CUDA meaning: c10::Half and
// c10::BFloat16 are CUDA's 16-bit types, at::acc_type accumulates them (and float) in float,
// C10_WARP_SIZE is 32, WARP_SHFL* are ATen/cuda/DeviceUtils.cuh's shuffles. The torch headers
// themselves are kept out like every system header. Included at the end of cuda_exec.h.
#pragma once

#define C10_WARP_SIZE 32

namespace c10 {
using Half = __half;
using BFloat16 = __nv_bfloat16;
}  // namespace c10

namespace at {
using c10::BFloat16;
using c10::Half;
template <typename T, bool is_cuda>
struct AccumulateType {
  using type = float;
};
template <bool is_cuda>
struct AccumulateType<double, is_cuda> {
  using type = double;
};
template <typename T, bool is_cuda>
using acc_type = typename AccumulateType<T, is_cuda>::type;
template <typename T>
using opmath_type = acc_type<T, true>;
}  // namespace at

template <typename T>
T WARP_SHFL(T value, int src_lane, int width = warpSize, unsigned mask = 0xffffffffu, CUSIM_LOC) {
  return __shfl_sync(mask, value, src_lane, width, loc);
}
template <typename T>
T WARP_SHFL_XOR(T value, int lane_mask, int width = warpSize, unsigned mask = 0xffffffffu, CUSIM_LOC) {
  return __shfl_xor_sync(mask, value, lane_mask, width, loc);
}
template <typename T>
T WARP_SHFL_UP(T value, unsigned delta, int width = warpSize, unsigned mask = 0xffffffffu, CUSIM_LOC) {
  return __shfl_up_sync(mask, value, delta, width, loc);
}
template <typename T>
T WARP_SHFL_DOWN(T value, unsigned delta, int width = warpSize, unsigned mask = 0xffffffffu, CUSIM_LOC) {
  return __shfl_down_sync(mask, value, delta, width, loc);
}
inline unsigned WARP_BALLOT(int predicate, unsigned mask = 0xffffffffu, CUSIM_LOC) {
  return __ballot_sync(mask, predicate, loc);
}
