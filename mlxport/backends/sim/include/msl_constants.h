// The constants metal_stdlib defines as macros (MSL specification, "Math Functions" constants
// for float and half, plus the C integer limits), with MSL's values and types: the float ones
// are float, the half ones are half. Included by msl_runtime.h, so every kernel sees them.
//
// C's <float.h>/<math.h> spell some of the float ones the same way with the same values; each
// is guarded so a host header reaching the translation unit first is harmless.
#pragma once

#include <climits>  // CHAR_BIT, SCHAR_MIN..ULONG_MAX (char is signed: kernels build with -fsigned-char)

#include "msl_types.h"

// ---------------------------------------------------------------- float
#ifndef MAXFLOAT
#define MAXFLOAT 0x1.fffffep+127f
#endif
#ifndef HUGE_VALF
#define HUGE_VALF __builtin_huge_valf()
#endif
#ifndef INFINITY
#define INFINITY __builtin_inff()
#endif
#ifndef NAN
#define NAN __builtin_nanf("")
#endif
#ifndef FLT_DIG
#define FLT_DIG 6
#endif
#ifndef FLT_MANT_DIG
#define FLT_MANT_DIG 24
#endif
#ifndef FLT_MAX_10_EXP
#define FLT_MAX_10_EXP (+38)
#endif
#ifndef FLT_MAX_EXP
#define FLT_MAX_EXP (+128)
#endif
#ifndef FLT_MIN_10_EXP
#define FLT_MIN_10_EXP (-37)
#endif
#ifndef FLT_MIN_EXP
#define FLT_MIN_EXP (-125)
#endif
#ifndef FLT_RADIX
#define FLT_RADIX 2
#endif
#ifndef FLT_MAX
#define FLT_MAX 0x1.fffffep+127f
#endif
#ifndef FLT_MIN
#define FLT_MIN 0x1p-126f
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 0x1p-23f
#endif

#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f

// ---------------------------------------------------------------- half
#define HALF_DIG 3
#define HALF_MANT_DIG 11
#define HALF_MAX_10_EXP (+4)
#define HALF_MAX_EXP (+16)
#define HALF_MIN_10_EXP (-4)
#define HALF_MIN_EXP (-13)
#define HALF_RADIX 2
#define HALF_MAX (static_cast<half>(0x1.ffcp+15f))
#define HALF_MIN (static_cast<half>(0x1p-14f))
#define HALF_EPSILON (static_cast<half>(0x1p-10f))
#define MAXHALF (static_cast<half>(0x1.ffcp+15f))
#define HUGE_VALH (static_cast<half>(__builtin_inff()))

#define M_E_H (static_cast<half>(M_E_F))
#define M_LOG2E_H (static_cast<half>(M_LOG2E_F))
#define M_LOG10E_H (static_cast<half>(M_LOG10E_F))
#define M_LN2_H (static_cast<half>(M_LN2_F))
#define M_LN10_H (static_cast<half>(M_LN10_F))
#define M_PI_H (static_cast<half>(M_PI_F))
#define M_PI_2_H (static_cast<half>(M_PI_2_F))
#define M_PI_4_H (static_cast<half>(M_PI_4_F))
#define M_1_PI_H (static_cast<half>(M_1_PI_F))
#define M_2_PI_H (static_cast<half>(M_2_PI_F))
#define M_2_SQRTPI_H (static_cast<half>(M_2_SQRTPI_F))
#define M_SQRT2_H (static_cast<half>(M_SQRT2_F))
#define M_SQRT1_2_H (static_cast<half>(M_SQRT1_2_F))
