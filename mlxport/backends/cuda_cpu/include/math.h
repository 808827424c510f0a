// <math.h> for the CPU executor: the CUDA math API (cuda_math.h) in place of the C library's, whose
// declarations of sqrtf & co. would clash with it. Found first because this directory is on the
// include path ahead of the compiler's.
#pragma once

#include "cuda_math.h"
