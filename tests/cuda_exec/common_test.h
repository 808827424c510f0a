// A local header: the file includes it with "..." (followed relative to the file).
#pragma once
#define EPSILON 1e-5f
template <class T> __host__ __device__ T ceil_div(T a, T b) { return (a + b - 1) / b; }
float* make_random(int n);
