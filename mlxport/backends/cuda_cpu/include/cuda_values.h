// The value half of CUDA for mlxport's CPU executor: what device code computes with, apart from
// threads, memory and synchronization (cuda_exec.h). Vector types and dim3, half and bfloat16,
// the math API and its intrinsics, and math_constants.h.
//
// Only compiler builtins and freestanding C++ headers (<cstdint>, <limits>, <type_traits>) are
// used. This directory's math.h and cmath stand in for the C and C++ libraries' (whose
// declarations of the math functions would clash with these); <float.h>, <limits.h>, <cfloat>
// and <climits> are left to the toolchain, whose macros agree with the ones cuda_math.h defines.
#pragma once

#include "cuda_types.h"
#include "cuda_math.h"
#include "math_constants.h"
#include "cuda_fp16.h"
#include "cuda_bf16.h"
