// The contract between a compiled kernel, the simulator runtime (rt/mlxsim_rt.cpp) and the
// Python driver (ctypes mirrors Buffer and LaunchParams in mlxport/backends/sim/runner.py).
// Plain C layouts only: this header must not depend on the MSL type headers.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mlxsim {

// AS_GENERIC: CUDA's one address space for global and shared memory alike.
enum AddressSpace : int32_t { AS_DEVICE = 1, AS_CONSTANT = 2, AS_THREADGROUP = 3, AS_GENERIC = 4 };

// One kernel argument (an input, a shape/strides/ndim parameter, an output) or one
// threadgroup allocation. Accesses are valid in [base, base + bytes); `data` is element 0.
struct Buffer {
  const char* name;
  char* base;
  int64_t bytes;
  char* data;
  int32_t elem_size;
  int32_t space;
  // Outputs only, one word per element: 0 untouched, else the tag (threadgroup index + 1) of the
  // threadgroup whose checked access touched it first, kAtomicTag for atomic accesses, or (where
  // races are reported after the launch) kConflictTag for two threadgroups without atomics.
  uint32_t* mask;
  // -1: not measured; else the end (in bytes from base) of the furthest checked access so far.
  int64_t touched;
  // 1: a counted launch counts the accesses of this (device) buffer for the cost estimate.
  int64_t counted;
};

// Every thread-position attribute of one thread, precomputed by the runtime.
struct ThreadAttrs {
  uint32_t thread_position_in_grid[3];
  uint32_t thread_position_in_threadgroup[3];
  uint32_t threadgroup_position_in_grid[3];
  uint32_t threads_per_threadgroup[3];
  uint32_t dispatch_threads_per_threadgroup[3];
  uint32_t threadgroups_per_grid[3];
  uint32_t threads_per_grid[3];
  uint32_t thread_index_in_threadgroup;
  uint32_t thread_index_in_simdgroup;
  uint32_t simdgroup_index_in_threadgroup;
  uint32_t simdgroups_per_threadgroup;
  uint32_t dispatch_simdgroups_per_threadgroup;
  uint32_t thread_index_in_quadgroup;
  uint32_t quadgroup_index_in_threadgroup;
  uint32_t quadgroups_per_threadgroup;
  uint32_t dispatch_quadgroups_per_threadgroup;
};

struct LaunchParams {
  const Buffer* buffers;
  int32_t nbuffers;
  int32_t fibers;   // 0: plain calls (no barrier or SIMD-group function in the kernel)
  int32_t threads;  // OS threads
  int32_t reverse;   // the order threads of a threadgroup, and threadgroups, run in: 0 as numbered,
                     // 1 reversed, 2 shuffled (the same permutation on every run)
  uint32_t grid[3];
  uint32_t threadgroup[3];
  int64_t stack_bytes;
  int64_t shared_bytes;  // dynamic threadgroup memory (CUDA's extern __shared__) per threadgroup
  int64_t tg_memory_limit;  // bytes of threadgroup memory a threadgroup may have; 0: Apple's 32 KB
  int32_t races_after;  // 1: an output element touched by two threadgroups is marked and reported
                        // after the launch (atomics may follow the access); 0: faults at once
  int32_t cuda;  // 1: messages name threads, blocks and barriers as CUDA does
  int64_t stats[4];  // out: threadgroups run, context switches, barrier rounds, SIMD syncs
  // 1: count what the kernel does (mlxsim_counters.h) into counts, with these line and bank sizes
  int32_t count;
  int32_t count_line_bytes;
  int32_t count_banks;
  int32_t count_bank_bytes;
  int64_t counts[12];  // out: counting::Count
};

using LaneFn = void (*)(const Buffer*, const ThreadAttrs*);

// Where a barrier or SIMD-group function was called (file is "source" or "header").
struct Site {
  const char* file;
  uint32_t line;
  uint32_t column;
};

constexpr uint32_t kSimdWidth = 32;

// The rendezvous of one SIMD-group collective: the runtime fills it when it releases the lanes
// waiting at one call site; the first lane to resume computes every lane's result.
struct Exchange {
  const void* in[kSimdWidth];
  void* out[kSimdWidth];
  uint32_t mask;   // lanes taking part (bit k = thread_index_in_simdgroup k)
  uint32_t lanes;  // lanes in this SIMD-group (fewer than 32 in a partial group)
  bool done;
};

int launch(const LaunchParams* params, LaneFn fn, char* err, int errlen);

Exchange* simd_sync(const void* in, void* out, Site site);
// fence: the memory the barrier orders (Metal's mem_flags; CUDA's __syncthreads orders all)
constexpr uint32_t kFenceDevice = 1, kFenceThreadgroup = 2, kFenceAll = 3;
void threadgroup_barrier_wait(Site site, uint32_t fence = kFenceAll);
void* tg_alloc(int slot, size_t bytes, size_t align, const char* name, int32_t elem_size,
               const Buffer** buf, bool* fresh);
const Buffer* find_buffer(const void* p);
// A program-scope `constant` array, known before a launch so that pointers into it are checked.
void constant_array(const void* base, size_t bytes, int32_t elem_size, const char* name);
// site: the subscript, named in the report where it is the candidate's own text
[[noreturn]] void fault_oob(const Buffer* buf, int64_t offset, size_t size, bool read_only, Site site);
[[noreturn]] void fault(const char* message);
[[noreturn]] void fault_misaligned(const Buffer* buf, int64_t offset, size_t size, size_t align);
[[noreturn]] void fault_index(const Buffer* buf, int64_t index, int64_t extent, Site site);
uint32_t current_simd_lane();
uint32_t current_threadgroup_tag();
// Two threadgroups touched an output element without atomics: a fault, or marked (races_after).
void shared_output(const Buffer* buf, int64_t index, uint32_t other_tag);
const ThreadAttrs* current_attrs();
// An atomic cell loaded, then stored: a store after this thread's own load is a read-modify-write
// in two operations, a race when another thread does the same (faults naming both threads).
void atomic_loaded(const void* cell);
// A checked access of threadgroup memory (where its race shadow is kept): a thread touching an
// element another thread wrote since the last barrier faults, naming both threads and lines.
void tg_touch(const Buffer* buf, int64_t offset, int64_t size, Site site);
// A checked access of an output (device memory) by a threadgroup of two or more threads: the same
// shadow, kept for the running threadgroup only (a race between threadgroups is Buffer::mask's).
void device_touch(const Buffer* buf, int64_t offset, int64_t size, Site site);
void atomic_stored(const void* cell);
// A CUDA atomic on a plain element (`atomicAdd(&s[i], 1)`): the subscript that took its address
// touched the race shadow, which must not take the atomic's change for a plain write.
void atomic_done(const void* cell);
// A kernel's printf, to stderr, at most kPrintLines lines a process.
int vprint(const char* format, __builtin_va_list args);
constexpr int kPrintLines = 200;
void* dynamic_threadgroup_memory(const Buffer** buf);
// A checked access of a counted buffer (Buffer::counted), for the cost estimate.
void count_access(const Buffer* buf, int64_t offset, int64_t size, Site site);
constexpr uint32_t kAtomicTag = 0xFFFFFFFFu;
constexpr uint32_t kConflictTag = 0xFFFFFFFEu;

}  // namespace mlxsim
