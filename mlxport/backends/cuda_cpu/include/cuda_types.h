// CUDA's built-in vector types (vector_types.h) and their make_* constructors (vector_functions.h)
// for mlxport's CPU executor (C++20, clang).
//
// They are plain aggregates with members x, y, z, w, laid out as CUDA lays them out on a 64-bit
// Linux host: 2- and 4-component types are aligned to their size up to 16 bytes (float2 8, float4
// 16, double2 16, long4 16), 1- and 3-component types only to their element (float3 is 12 bytes
// with alignment 4). CUDA defines no arithmetic on them, so neither does this header: kernels
// that want float4 + float4 define the operator themselves, and can.
#pragma once

#include <cstddef>
#include <cstdint>

static_assert(sizeof(long) == 8, "CUDA's 64-bit Linux ABI: long is 64-bit");

// The short names nvcc's host headers (glibc's <sys/types.h>) put in every .cu file.
using uint = unsigned int;
using ushort = unsigned short;
using ulong = unsigned long;

#define CUDA_CPU_VEC1(name, T) \
  struct name {                \
    T x;                       \
  };
#define CUDA_CPU_VEC2(name, T, A) \
  struct alignas(A) name {        \
    T x, y;                       \
  };
#define CUDA_CPU_VEC3(name, T) \
  struct name {                \
    T x, y, z;                 \
  };
#define CUDA_CPU_VEC4(name, T, A) \
  struct alignas(A) name {        \
    T x, y, z, w;                 \
  };

// CUDA's char vectors hold signed char, whatever the signedness of plain char.
#define CUDA_CPU_VECS(name, T, A2, A4) \
  CUDA_CPU_VEC1(name##1, T)            \
  CUDA_CPU_VEC2(name##2, T, A2)        \
  CUDA_CPU_VEC3(name##3, T)            \
  CUDA_CPU_VEC4(name##4, T, A4)
CUDA_CPU_VECS(char, signed char, 2, 4)
CUDA_CPU_VECS(uchar, unsigned char, 2, 4)
CUDA_CPU_VECS(short, short, 4, 8)
CUDA_CPU_VECS(ushort, unsigned short, 4, 8)
CUDA_CPU_VECS(int, int, 8, 16)
CUDA_CPU_VECS(uint, unsigned int, 8, 16)
CUDA_CPU_VECS(float, float, 8, 16)
// The 8-byte elements stop at 16: long4, longlong4 and double4 are 32 bytes aligned to 16.
CUDA_CPU_VECS(long, long, 16, 16)
CUDA_CPU_VECS(ulong, unsigned long, 16, 16)
CUDA_CPU_VECS(longlong, long long, 16, 16)
CUDA_CPU_VECS(ulonglong, unsigned long long, 16, 16)
CUDA_CPU_VECS(double, double, 16, 16)
#undef CUDA_CPU_VECS

// CUDA 13 spells the two possible alignments of the 32-byte vectors out.
#define CUDA_CPU_VEC4_ALIGNED(name, T)   \
  CUDA_CPU_VEC4(name##4_16a, T, 16)      \
  CUDA_CPU_VEC4(name##4_32a, T, 32)
CUDA_CPU_VEC4_ALIGNED(long, long)
CUDA_CPU_VEC4_ALIGNED(ulong, unsigned long)
CUDA_CPU_VEC4_ALIGNED(longlong, long long)
CUDA_CPU_VEC4_ALIGNED(ulonglong, unsigned long long)
CUDA_CPU_VEC4_ALIGNED(double, double)
#undef CUDA_CPU_VEC4_ALIGNED
#undef CUDA_CPU_VEC1
#undef CUDA_CPU_VEC2
#undef CUDA_CPU_VEC3
#undef CUDA_CPU_VEC4

// make_<type>(...): one argument per component, of the element type.
#define CUDA_CPU_MAKE(name, T)                                                       \
  constexpr name##1 make_##name##1(T x) { return name##1{x}; }                      \
  constexpr name##2 make_##name##2(T x, T y) { return name##2{x, y}; }              \
  constexpr name##3 make_##name##3(T x, T y, T z) { return name##3{x, y, z}; }      \
  constexpr name##4 make_##name##4(T x, T y, T z, T w) { return name##4{x, y, z, w}; }
CUDA_CPU_MAKE(char, signed char)
CUDA_CPU_MAKE(uchar, unsigned char)
CUDA_CPU_MAKE(short, short)
CUDA_CPU_MAKE(ushort, unsigned short)
CUDA_CPU_MAKE(int, int)
CUDA_CPU_MAKE(uint, unsigned int)
CUDA_CPU_MAKE(long, long)
CUDA_CPU_MAKE(ulong, unsigned long)
CUDA_CPU_MAKE(longlong, long long)
CUDA_CPU_MAKE(ulonglong, unsigned long long)
CUDA_CPU_MAKE(float, float)
CUDA_CPU_MAKE(double, double)
#undef CUDA_CPU_MAKE

#define CUDA_CPU_MAKE_ALIGNED(name, T)                                                              \
  constexpr name##4_16a make_##name##4_16a(T x, T y, T z, T w) { return name##4_16a{x, y, z, w}; } \
  constexpr name##4_32a make_##name##4_32a(T x, T y, T z, T w) { return name##4_32a{x, y, z, w}; }
CUDA_CPU_MAKE_ALIGNED(long, long)
CUDA_CPU_MAKE_ALIGNED(ulong, unsigned long)
CUDA_CPU_MAKE_ALIGNED(longlong, long long)
CUDA_CPU_MAKE_ALIGNED(ulonglong, unsigned long long)
CUDA_CPU_MAKE_ALIGNED(double, double)
#undef CUDA_CPU_MAKE_ALIGNED

// dim3: unsigned x, y, z, each 1 unless given; converts to and from uint3.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
