// The simulator runtime: threadgroups spread over OS threads; within a threadgroup, lanes run
// as fibers that switch only at barriers and SIMD-group collectives (or as plain calls when
// the kernel has neither). Compiled once, linked into every kernel library.
#include "mlxsim_abi.h"
#include "mlxsim_counters.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__) && !defined(__aarch64__)
#include <ucontext.h>
#endif

namespace mlxsim {
namespace {

// ---------------------------------------------------------------- context switching
// swapcontext saves the signal mask with a syscall on every switch; a register-only switch
// is ~50x cheaper. Only callee-saved state is saved: every switch is a function call.
#if defined(__x86_64__)
extern "C" __attribute__((naked, noinline)) void mlxsim_switch(void** /*save_sp*/, void* /*to_sp*/) {
  asm volatile(
      "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "subq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n\t");
}
extern "C" __attribute__((naked, noinline)) void mlxsim_trampoline() {
  asm volatile("movq %r12, %rdi\n\tandq $-16, %rsp\n\tcallq *%r13\n\tud2\n\t");
}
void* init_stack(char* top, void (*entry)(void*), void* arg) {
  auto* sp = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15)) - 10;
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  sp[0] = uint64_t(mxcsr) | (uint64_t(fpucw) << 32);
  sp[1] = sp[2] = 0;                              // r15 r14
  sp[3] = reinterpret_cast<uint64_t>(entry);      // r13
  sp[4] = reinterpret_cast<uint64_t>(arg);        // r12
  sp[5] = sp[6] = 0;                              // rbx rbp
  sp[7] = reinterpret_cast<uint64_t>(&mlxsim_trampoline);
  return sp;
}
void switch_to(void** save, void* to) { mlxsim_switch(save, to); }
#elif defined(__aarch64__)
extern "C" __attribute__((naked, noinline)) void mlxsim_switch(void** /*save_sp*/, void* /*to_sp*/) {
  asm volatile(
      "sub sp, sp, #160\n\t"
      "stp x19, x20, [sp, #0]\n\tstp x21, x22, [sp, #16]\n\tstp x23, x24, [sp, #32]\n\t"
      "stp x25, x26, [sp, #48]\n\tstp x27, x28, [sp, #64]\n\tstp x29, x30, [sp, #80]\n\t"
      "stp d8, d9, [sp, #96]\n\tstp d10, d11, [sp, #112]\n\tstp d12, d13, [sp, #128]\n\t"
      "stp d14, d15, [sp, #144]\n\t"
      "mov x9, sp\n\tstr x9, [x0]\n\tmov sp, x1\n\t"
      "ldp x19, x20, [sp, #0]\n\tldp x21, x22, [sp, #16]\n\tldp x23, x24, [sp, #32]\n\t"
      "ldp x25, x26, [sp, #48]\n\tldp x27, x28, [sp, #64]\n\tldp x29, x30, [sp, #80]\n\t"
      "ldp d8, d9, [sp, #96]\n\tldp d10, d11, [sp, #112]\n\tldp d12, d13, [sp, #128]\n\t"
      "ldp d14, d15, [sp, #144]\n\t"
      "add sp, sp, #160\n\tret\n\t");
}
extern "C" __attribute__((naked, noinline)) void mlxsim_trampoline() {
  asm volatile("mov x0, x19\n\tblr x20\n\tbrk #0\n\t");
}
void* init_stack(char* top, void (*entry)(void*), void* arg) {
  auto* sp = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15)) - 20;
  std::memset(sp, 0, 160);
  sp[0] = reinterpret_cast<uint64_t>(arg);    // x19
  sp[1] = reinterpret_cast<uint64_t>(entry);  // x20
  sp[11] = reinterpret_cast<uint64_t>(&mlxsim_trampoline);  // x30
  return sp;
}
void switch_to(void** save, void* to) { mlxsim_switch(save, to); }
#else
#error "the simulator runtime needs x86_64 or aarch64"
#endif

// ---------------------------------------------------------------- launch state

enum class LaneState : uint8_t { Ready, AtSimd, AtBarrier, Done, Aborted };

struct Worker;

struct Lane {
  void* sp = nullptr;
  LaneState state = LaneState::Ready;
  Site site{};
  const void* in = nullptr;
  void* out = nullptr;
  ThreadAttrs attrs{};
  Worker* worker = nullptr;
  const void* loaded[4]{};  // the atomic cells this thread loaded last (a load-then-store update)
  uint8_t loaded_next = 0;
  uint32_t fence = 0;  // the mem_flags of the barrier it waits at
};

// Per element of threadgroup memory, and of an output a threadgroup touched (device memory): the
// thread that touched it last since the last barrier,
// the value it saw (a changed value is a write), and whether that thread wrote it; and another
// thread that read it in the same interval, which races with a write whichever ran first.
struct Shadow {
  uint64_t epoch = 0;  // Worker::epoch of the access
  uint64_t sg_epoch = 0;  // its SIMD-group's count of syncs then
  uint64_t bits = 0;
  Site site{};  // the access
  Site wrote_at{};  // where the element was last written, if it was
  uint64_t wrote_sg_epoch = 0;  // the writer's SIMD-group's count of syncs at that write
  uint32_t lane = 0;  // thread_index_in_threadgroup + 1; 0: untouched
  uint32_t simdgroup = 0;
  bool wrote = false;
  uint32_t reader = 0;  // another thread that read it since the last barrier (lane + 1); 0: none
  uint32_t reader_simdgroup = 0;
  uint64_t reader_sg_epoch = 0;
  Site read_at{};
  // CUDA: the access found every byte it covers unwritten (the poison): still so at the next
  // access or barrier, it read shared memory no thread wrote.
  bool unwritten = false;
  int32_t access_size = 0;
  int64_t access_off = 0;
  // CUDA: another thread touched the element after this interval's write by `writer`, which
  // wrote `written` at `wrote_at`; the element holds ~written until the toucher's next access
  // or barrier tells a read (still ~written) from a write of the same value (written again).
  bool pending = false;
  uint32_t writer = 0;
  uint64_t written = 0;
};

// An element of threadgroup or device memory touched since the last barrier: checked for a write
// no later access saw when the threads reach the barrier.
struct Touched {
  Shadow* shadow;
  const Buffer* buf;
  int64_t element;
};

struct TgSlot {
  char* storage = nullptr;
  Buffer buf{};
  std::vector<Shadow> shadow;  // kept where races are checked (MSL kernels)
};

struct Launch {
  const LaunchParams* p;
  LaneFn fn;
  uint32_t groups[3];
  uint64_t total_groups;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string error;
  std::atomic<int64_t> switches{0}, rounds{0}, syncs{0};
  std::mutex updates_mu;
  std::unordered_map<const void*, uint64_t> updates;  // atomic cell -> the thread (linear id) that updated it
  counting::Unique* unique = nullptr;  // a counted launch's touched lines
  int64_t counts[counting::kCounts]{};
};

struct Worker {
  Launch* launch = nullptr;
  // Count threadgroups and the barriers that order threadgroup (epoch) and device (device_epoch)
  // memory: accesses in one epoch race.
  uint64_t epoch = 0, device_epoch = 0;
  std::vector<uint64_t> sg_epochs;  // per SIMD-group: syncs so far
  uint32_t tg_tag = 1;  // the running threadgroup's linear index + 1
  std::vector<Lane> lanes;
  std::vector<Exchange> simds;
  char* stacks = nullptr;
  size_t stack_stride = 0;
  size_t stack_count = 0;
  void* sched_sp = nullptr;
  jmp_buf abort_env;
  bool fibers = false;
  Lane* current = nullptr;
  // A deque, not a vector: lanes keep `const Buffer*` into these slots (Ptr::buf_) while later
  // declarations add slots, and growing a deque at the end never moves existing elements.
  std::deque<TgSlot> slots;
  TgSlot dynamic;  // CUDA's extern __shared__ memory, LaunchParams::shared_bytes of it
  std::vector<char*> arena;  // owned allocations of this threadgroup
  std::vector<Touched> touched;  // threadgroup and device memory touched since the last barrier
  // The shadow of the output elements the running threadgroup touched, by address: its size is
  // what one threadgroup touches, not the output's.
  std::unordered_map<const char*, Shadow> device_shadow;
  size_t group_threads = 0;  // threads of the running threadgroup
  size_t tg_bytes = 0;
  int64_t switches = 0, rounds = 0, syncs = 0;
  counting::Counter* counter = nullptr;  // a counted launch only

  ~Worker() {
    if (stacks) munmap(stacks, stack_stride * stack_count);
    for (char* a : arena) std::free(a);
  }
};

thread_local Worker* tl_worker = nullptr;
// Program-scope constant arrays, registered by the library's entry before each launch (so
// read-only while workers run) and forgotten after it.
std::deque<Buffer> g_constant_arrays;

constexpr size_t kAppleThreadgroupMemory = 32768;

// The bytes threadgroup memory starts as, by offset (storage is 16-byte aligned): 0x7FF5 repeated
// is a NaN as half, bfloat16, float and double, and no small or extreme integer.
constexpr uint8_t poison_byte(int64_t off) { return off & 1 ? 0x7F : 0xF5; }
[[gnu::always_inline]] inline bool unwritten(const char* base, int64_t off, int64_t size) {
  for (int64_t i = off; i < off + size; ++i)
    if (uint8_t(base[i]) != poison_byte(i)) return false;
  return true;
}

void record_error(Launch* L, const std::string& msg) {
  std::lock_guard<std::mutex> lock(L->mu);
  if (L->error.empty()) L->error = msg;
  L->stop.store(true);
}

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string pos3(const uint32_t* v) { return fmt("(%u,%u,%u)", v[0], v[1], v[2]); }

bool cuda_names() { return tl_worker && tl_worker->launch->p->cuda; }

std::string who(const Lane* lane) {
  if (!lane) return "";
  if (cuda_names())
    return " by threadIdx " + pos3(lane->attrs.thread_position_in_threadgroup) + " of blockIdx " +
           pos3(lane->attrs.threadgroup_position_in_grid);
  return " by thread_position_in_threadgroup " + pos3(lane->attrs.thread_position_in_threadgroup) +
         " of threadgroup_position_in_grid " + pos3(lane->attrs.threadgroup_position_in_grid) +
         " (thread_position_in_grid " + pos3(lane->attrs.thread_position_in_grid) + ")";
}

// A CUDA access through a pointer is checked in the runtime's header, where it has no line of the
// kernel's own (a subscript of a __shared__ array of two or more dimensions has).
std::string where(const Site& s) {
  const char* file = s.file ? s.file : "?";
  if (cuda_names() && (std::strstr(file, "backends/sim/include/") || std::strstr(file, "backends/cuda_cpu/include/")))
    return "through a pointer, at a line not known";
  if (const char* slash = std::strrchr(file, '/'); slash && cuda_names()) file = slash + 1;
  return fmt("%s line %u", file, s.line);
}

[[noreturn]] void abort_lane() {
  Worker* w = tl_worker;
  if (w->fibers) {
    w->current->state = LaneState::Aborted;
    switch_to(&w->current->sp, w->sched_sp);
    __builtin_unreachable();
  }
  longjmp(w->abort_env, 1);
}

// ---------------------------------------------------------------- thread attributes

void set3(uint32_t* d, uint32_t x, uint32_t y, uint32_t z) { d[0] = x; d[1] = y; d[2] = z; }

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

void fill_attrs(ThreadAttrs& a, const Launch& L, const uint32_t* tg, const uint32_t* size,
                const uint32_t* dispatch, uint32_t x, uint32_t y, uint32_t z) {
  const uint32_t* grid = L.p->grid;
  set3(a.thread_position_in_threadgroup, x, y, z);
  set3(a.threadgroup_position_in_grid, tg[0], tg[1], tg[2]);
  set3(a.threads_per_threadgroup, size[0], size[1], size[2]);
  set3(a.dispatch_threads_per_threadgroup, dispatch[0], dispatch[1], dispatch[2]);
  set3(a.threadgroups_per_grid, L.groups[0], L.groups[1], L.groups[2]);
  set3(a.threads_per_grid, grid[0], grid[1], grid[2]);
  set3(a.thread_position_in_grid, tg[0] * dispatch[0] + x, tg[1] * dispatch[1] + y, tg[2] * dispatch[2] + z);
  uint32_t index = x + size[0] * (y + size[1] * z);
  uint32_t n = size[0] * size[1] * size[2];
  uint32_t dn = dispatch[0] * dispatch[1] * dispatch[2];
  a.thread_index_in_threadgroup = index;
  a.thread_index_in_simdgroup = index % kSimdWidth;
  a.simdgroup_index_in_threadgroup = index / kSimdWidth;
  a.simdgroups_per_threadgroup = ceil_div(n, kSimdWidth);
  a.dispatch_simdgroups_per_threadgroup = ceil_div(dn, kSimdWidth);
  a.thread_index_in_quadgroup = index % 4;
  a.quadgroup_index_in_threadgroup = index / 4;
  a.quadgroups_per_threadgroup = ceil_div(n, 4);
  a.dispatch_quadgroups_per_threadgroup = ceil_div(dn, 4);
}

// ---------------------------------------------------------------- fibers

void fiber_entry(void* arg) {
  auto* lane = static_cast<Lane*>(arg);
  Worker* w = lane->worker;
  w->launch->fn(w->launch->p->buffers, &lane->attrs);
  lane->state = LaneState::Done;
  switch_to(&lane->sp, w->sched_sp);
  __builtin_unreachable();
}

void ensure_stacks(Worker& w, size_t n) {
  if (w.stack_count >= n) return;
  if (w.stacks) munmap(w.stacks, w.stack_stride * w.stack_count);
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t size = (size_t(w.launch->p->stack_bytes) + page - 1) / page * page;
  w.stack_stride = size + page;  // one guard page under each stack
  w.stack_count = n;
  void* mem = mmap(nullptr, w.stack_stride * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (mem == MAP_FAILED) {
    w.stacks = nullptr;
    w.stack_count = 0;
    return;
  }
  w.stacks = static_cast<char*>(mem);
  for (size_t i = 0; i < n; ++i) mprotect(w.stacks + i * w.stack_stride, page, PROT_NONE);
}

bool site_equal(const Site& a, const Site& b) {
  return a.line == b.line && a.column == b.column && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

int file_rank(const char* f) {
  if (std::strcmp(f, "header") == 0) return 0;
  if (std::strcmp(f, "source") == 0) return 1;
  return 2;
}

bool site_before(const Site& a, const Site& b) {
  int ra = file_rank(a.file), rb = file_rank(b.file);
  if (ra != rb) return ra < rb;
  if (a.line != b.line) return a.line < b.line;
  return a.column < b.column;
}

// Release, in each SIMD-group, the lanes waiting at the earliest collective call site: lanes that
// left a loop early wait at a later site until the others catch up, as the hardware reconverges.
// Release the lanes of SIMD-group g waiting at its earliest collective (every lane of it is blocked).
bool release_simd_group(Worker& w, size_t n, size_t g) {
  {
    size_t lo = g * kSimdWidth, hi = std::min(n, lo + kSimdWidth);
    const Site* best = nullptr;
    for (size_t i = lo; i < hi; ++i)
      if (w.lanes[i].state == LaneState::AtSimd && (!best || site_before(w.lanes[i].site, *best)))
        best = &w.lanes[i].site;
    if (!best) return false;
    Site site = *best;
    Exchange& ex = w.simds[g];
    ex.mask = 0;
    ex.lanes = uint32_t(hi - lo);
    ex.done = false;
    for (size_t i = lo; i < hi; ++i) {
      Lane& l = w.lanes[i];
      if (l.state == LaneState::AtSimd && site_equal(l.site, site)) {
        uint32_t k = uint32_t(i - lo);
        ex.mask |= 1u << k;
        ex.in[k] = l.in;
        ex.out[k] = l.out;
        l.state = LaneState::Ready;
      }
    }
    ++w.syncs;
    if (g < w.sg_epochs.size()) ++w.sg_epochs[g];
  }
  return true;
}

bool release_simd(Worker& w, size_t n) {
  bool released = false;
  for (size_t g = 0; g < (n + kSimdWidth - 1) / kSimdWidth; ++g) released |= release_simd_group(w, n, g);
  return released;
}

std::string lane_pos(const Lane& l) { return pos3(l.attrs.thread_position_in_threadgroup); }

bool unseen_writes_race(Worker& w, uint32_t fence);

// All lanes are at a barrier or finished: release them, or report why they never could.
bool release_barrier(Worker& w, size_t n) {
  const Lane* waiting = nullptr;
  const Lane* done = nullptr;
  const Lane* other = nullptr;
  size_t n_wait = 0;
  for (size_t i = 0; i < n; ++i) {
    const Lane& l = w.lanes[i];
    if (l.state == LaneState::AtBarrier) {
      ++n_wait;
      if (!waiting) waiting = &l;
      else if (!other && !site_equal(l.site, waiting->site)) other = &l;
    } else if (!done) {
      done = &l;
    }
  }
  if (!waiting) return false;
  const uint32_t* tg = waiting->attrs.threadgroup_position_in_grid;
  const bool cuda = w.launch->p->cuda != 0;
  const char* group = cuda ? "block" : "threadgroup";
  const char* barrier = cuda ? "__syncthreads" : "threadgroup_barrier";
  if (done) {
    record_error(w.launch, fmt("barrier divergence in %s %s: %zu of %zu threads wait at %s (%s) while the others "
                               "returned without reaching it (e.g. thread %s); every thread of a %s must reach the "
                               "same barriers",
                               group, pos3(tg).c_str(), n_wait, n, barrier, where(waiting->site).c_str(),
                               lane_pos(*done).c_str(), group));
    return false;
  }
  if (other) {
    record_error(w.launch, fmt("barrier divergence (deadlock on a GPU) in %s %s: thread %s waits at %s (%s) while "
                               "thread %s waits at another barrier (%s); every thread of a %s must reach the same "
                               "barriers",
                               group, pos3(tg).c_str(), lane_pos(*waiting).c_str(), barrier,
                               where(waiting->site).c_str(), lane_pos(*other).c_str(), where(other->site).c_str(),
                               group));
    return false;
  }
  // A barrier orders only the memory its flags name: device memory written before a
  // threadgroup_barrier(mem_flags::mem_threadgroup) may be unseen by another thread after it.
  const uint32_t fence = waiting->fence;
  if (!unseen_writes_race(w, fence)) return false;
  for (size_t i = 0; i < n; ++i) w.lanes[i].state = LaneState::Ready;
  if (w.counter) w.counter->flush();
  ++w.rounds;
  if (fence & kFenceThreadgroup) ++w.epoch;
  if (fence & kFenceDevice) ++w.device_epoch;
  return true;
}

void reset_threadgroup_memory(Worker& w) {
  for (TgSlot& s : w.slots) s.storage = nullptr;
  w.touched.clear();
  w.device_shadow.clear();
  w.dynamic.storage = nullptr;
  for (char* a : w.arena) std::free(a);
  w.arena.clear();
  w.tg_bytes = 0;
}

// The k-th of n in the launch's order (LaunchParams::reverse): as numbered, reversed, or
// shuffled by an affine permutation (k * a + c) mod n, a coprime to n: the same on every run.
uint64_t nth(uint64_t k, uint64_t n, int32_t order, uint64_t salt) {
  if (order == 1) return n - 1 - k;
  if (order != 2 || n < 3) return k;
  uint64_t a = (0x9E3779B97F4A7C15ull ^ (salt * 0xBF58476D1CE4E5B9ull)) % n;
  while (std::gcd(a, n) != 1) a = a + 1 < n ? a + 1 : 1;
  return uint64_t((static_cast<unsigned __int128>(k) * a + salt + n / 2) % n);
}

void run_fibers(Worker& w, size_t n) {
  ensure_stacks(w, n);
  if (!w.stacks) {
    record_error(w.launch, "could not allocate fiber stacks (memory limit?)");
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    Lane& l = w.lanes[i];
    l.state = LaneState::Ready;
    l.worker = &w;
    l.sp = init_stack(w.stacks + (i + 1) * w.stack_stride, &fiber_entry, &l);
  }
  const int32_t order = w.launch->p->reverse;
  if (order != 0) {
    // Out of order, SIMD-groups also run ahead of one another, each as far as it gets before a
    // threadgroup barrier, as a GPU may schedule them: a missing barrier between them shows.
    const size_t nsimd = (n + kSimdWidth - 1) / kSimdWidth;
    for (;;) {
      for (size_t j = 0; j < nsimd; ++j) {
        const size_t g = nth(j, nsimd, order, w.tg_tag + 1);
        const size_t lo = g * kSimdWidth, width = std::min(n, lo + kSimdWidth) - lo;
        do {
          for (size_t k = 0; k < width; ++k) {
            Lane& l = w.lanes[lo + nth(k, width, order, w.tg_tag)];
            if (l.state != LaneState::Ready) continue;
            w.current = &l;
            switch_to(&w.sched_sp, l.sp);
            ++w.switches;
            if (l.state == LaneState::Aborted || w.launch->stop.load(std::memory_order_relaxed)) return;
          }
        } while (release_simd_group(w, n, g));
      }
      if (!release_barrier(w, n)) return;
    }
  }
  for (;;) {
    for (size_t k = 0; k < n; ++k) {
      Lane& l = w.lanes[nth(k, n, order, w.tg_tag)];
      if (l.state != LaneState::Ready) continue;
      w.current = &l;
      switch_to(&w.sched_sp, l.sp);
      ++w.switches;
      if (l.state == LaneState::Aborted || w.launch->stop.load(std::memory_order_relaxed)) return;
    }
    if (release_simd(w, n)) continue;
    if (!release_barrier(w, n)) return;
  }
}

void run_plain(Worker& w, size_t n) {
  if (setjmp(w.abort_env)) return;
  const int32_t order = w.launch->p->reverse;
  for (size_t k = 0; k < n; ++k) {
    w.current = &w.lanes[nth(k, n, order, w.tg_tag)];
    w.launch->fn(w.launch->p->buffers, &w.current->attrs);
    if (w.counter && order == 0 && (k + 1) % kSimdWidth == 0) w.counter->flush();  // a SIMD-group done
  }
}

void run_threadgroup(Worker& w, uint64_t g) {
  Launch& L = *w.launch;
  w.tg_tag = uint32_t(g % (uint64_t(kAtomicTag) - 1)) + 1;
  const uint32_t* grid = L.p->grid;
  uint32_t dispatch[3], tg[3], size[3];
  for (int d = 0; d < 3; ++d) dispatch[d] = std::min(L.p->threadgroup[d], grid[d]);
  tg[0] = uint32_t(g % L.groups[0]);
  tg[1] = uint32_t(g / L.groups[0] % L.groups[1]);
  tg[2] = uint32_t(g / (uint64_t(L.groups[0]) * L.groups[1]));
  for (int d = 0; d < 3; ++d) size[d] = std::min(dispatch[d], grid[d] - tg[d] * dispatch[d]);
  size_t n = size_t(size[0]) * size[1] * size[2];
  w.group_threads = n;
  if (w.lanes.size() < n) w.lanes.resize(n);
  if (w.simds.size() < n / kSimdWidth + 1) w.simds.resize(n / kSimdWidth + 1);
  for (uint32_t z = 0; z < size[2]; ++z)
    for (uint32_t y = 0; y < size[1]; ++y)
      for (uint32_t x = 0; x < size[0]; ++x) {
        Lane& l = w.lanes[x + size[0] * (y + size[1] * z)];
        fill_attrs(l.attrs, L, tg, size, dispatch, x, y, z);
        l.loaded_next = 0;
        for (auto& c : l.loaded) c = nullptr;
      }
  reset_threadgroup_memory(w);
  ++w.epoch, ++w.device_epoch;
  if (w.sg_epochs.size() < n / kSimdWidth + 1) w.sg_epochs.resize(n / kSimdWidth + 1);
  if (w.counter) w.counter->begin(n);
  if (w.fibers) run_fibers(w, n);
  else run_plain(w, n);
  w.current = nullptr;
  if (w.counter) w.counter->end_threadgroup(n, w.tg_bytes);
  if (!L.stop.load(std::memory_order_relaxed)) unseen_writes_race(w, kFenceAll);  // the end is a barrier too
}

void worker_main(Launch* L) {
  Worker w;
  w.launch = L;
  w.fibers = L->p->fibers != 0;
  const LaunchParams* p = L->p;
  counting::Counter counter{p->count_line_bytes, p->count_banks, p->count_bank_bytes,
                            L->unique ? L->unique->rows.data() : nullptr};
  if (L->unique) w.counter = &counter;
  tl_worker = &w;
  for (;;) {
    if (L->stop.load(std::memory_order_relaxed)) break;
    uint64_t g = L->next.fetch_add(1);
    if (g >= L->total_groups) break;
    run_threadgroup(w, nth(g, L->total_groups, L->p->reverse, 0));
  }
  L->switches += w.switches;
  L->rounds += w.rounds;
  L->syncs += w.syncs;
  if (w.counter) {
    std::lock_guard<std::mutex> lock(L->mu);
    for (int i = 0; i < counting::kCounts; ++i)
      L->counts[i] = i == counting::kTgMemoryBytes ? std::max(L->counts[i], counter.totals[i])
                                                   : L->counts[i] + counter.totals[i];
  }
  tl_worker = nullptr;
}

}  // namespace

// ---------------------------------------------------------------- API used by kernels

int launch(const LaunchParams* p, LaneFn fn, char* err, int errlen) {
  Launch L;
  L.p = p;
  L.fn = fn;
  L.total_groups = 1;
  for (int d = 0; d < 3; ++d) {
    uint32_t t = std::min(p->threadgroup[d], p->grid[d]);
    L.groups[d] = ceil_div(p->grid[d], t);
    L.total_groups *= L.groups[d];
  }
  std::unique_ptr<counting::Unique> unique;
  if (p->count) {
    unique = std::make_unique<counting::Unique>(p);
    L.unique = unique.get();
  }
  int nthreads = int(std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(std::max(p->threads, 1)), L.total_groups)));
  std::vector<std::thread> threads;
  for (int i = 1; i < nthreads; ++i) threads.emplace_back(worker_main, &L);
  worker_main(&L);
  for (auto& t : threads) t.join();
  g_constant_arrays.clear();  // the library holding them may be unloaded before the next launch
  auto* stats = const_cast<LaunchParams*>(p)->stats;
  stats[0] = int64_t(std::min<uint64_t>(L.next.load(), L.total_groups));
  stats[1] = L.switches.load();
  stats[2] = L.rounds.load();
  stats[3] = L.syncs.load();
  if (unique) {
    L.counts[counting::kDeviceUniqueLines] = unique->lines();
    std::copy(std::begin(L.counts), std::end(L.counts), const_cast<LaunchParams*>(p)->counts);
  }
  if (L.error.empty()) return 0;
  std::snprintf(err, size_t(errlen), "%s", L.error.c_str());
  return 1;
}

Exchange* simd_sync(const void* in, void* out, Site site) {
  Worker* w = tl_worker;
  if (!w->fibers) fault("internal error: a SIMD-group function ran without fibers");
  Lane* l = w->current;
  l->in = in;
  l->out = out;
  l->site = site;
  l->state = LaneState::AtSimd;
  switch_to(&l->sp, w->sched_sp);
  return &w->simds[l->attrs.simdgroup_index_in_threadgroup];
}

void threadgroup_barrier_wait(Site site, uint32_t fence) {
  Worker* w = tl_worker;
  if (!w->fibers) fault("internal error: a barrier ran without fibers");
  Lane* l = w->current;
  l->site = site;
  l->fence = fence;
  l->state = LaneState::AtBarrier;
  switch_to(&l->sp, w->sched_sp);
}

namespace {

// Fresh threadgroup storage of `bytes`, counted against the launch's limit.
char* tg_storage(Worker* w, size_t bytes, size_t align, const char* name) {
  w->tg_bytes += (bytes + 15) / 16 * 16;
  const int64_t limit = w->launch->p->tg_memory_limit;
  if (limit <= 0 && w->tg_bytes > kAppleThreadgroupMemory) {
    fault(fmt("threadgroup memory: declaring %s brings the threadgroup to %zu bytes, over the 32 KB "
              "(32768 bytes) Apple GPUs allow", name, w->tg_bytes).c_str());
  }
  if (limit > 0 && int64_t(w->tg_bytes) > limit) {
    fault(fmt("shared memory: %s brings the block to %zu bytes, over the %lld bytes a block may have",
              name, w->tg_bytes, (long long)limit).c_str());
  }
  align = std::max<size_t>(align, 16);
  // Never 0 bytes: a null block would leave the slot unallocated and give each lane its own.
  size_t alloc = std::max<size_t>(1, (bytes + align - 1) / align) * align;
  auto* mem = static_cast<char*>(std::aligned_alloc(align, alloc));
  if (!mem) fault(fmt("threadgroup memory: could not allocate %zu bytes for %s", bytes, name).c_str());
  // Threadgroup memory starts as garbage on a GPU: a NaN of every float width, and an unlikely
  // integer, make reads before writes show (and let CUDA's shadow tell them).
  for (size_t i = 0; i < bytes; ++i) mem[i] = char(poison_byte(int64_t(i)));
  w->arena.push_back(mem);
  return mem;
}

}  // namespace

// Races in threadgroup memory are checked for MSL kernels and CUDA originals alike (a golden must
// not be the product of a race).
void watch(Worker&, TgSlot& s) {
  s.shadow.assign(size_t(s.buf.bytes / std::max<int32_t>(s.buf.elem_size, 1)), Shadow{});
  s.buf.mask = reinterpret_cast<uint32_t*>(s.shadow.data());
}

void* tg_alloc(int slot, size_t bytes, size_t align, const char* name, int32_t elem_size, const Buffer** buf,
               bool* fresh) {
  Worker* w = tl_worker;
  if (size_t(slot) >= w->slots.size()) w->slots.resize(size_t(slot) + 1);  // deque: no element moves
  TgSlot& s = w->slots[size_t(slot)];
  *fresh = false;
  if (!s.storage) {
    char* mem = tg_storage(w, bytes, align, name);
    s.storage = mem;
    s.buf = Buffer{name, mem, int64_t(bytes), mem, elem_size, AS_THREADGROUP, nullptr, -1};
    watch(*w, s);
    *fresh = true;
  }
  *buf = &s.buf;
  return s.storage;
}

void* dynamic_threadgroup_memory(const Buffer** buf) {
  Worker* w = tl_worker;
  TgSlot& s = w->dynamic;
  if (!s.storage) {
    const size_t bytes = size_t(w->launch->p->shared_bytes);
    char* mem = tg_storage(w, bytes, 16, "extern __shared__ memory");
    s.storage = mem;
    s.buf = Buffer{"extern __shared__ memory", mem, int64_t(bytes), mem, 1, AS_THREADGROUP, nullptr, -1};
    watch(*w, s);
  }
  *buf = &s.buf;
  return s.storage;
}

int vprint(const char* format, __builtin_va_list args) {
  static std::atomic<int> lines{0};
  if (lines.fetch_add(1) >= kPrintLines) return 0;
  return std::vfprintf(stderr, format, args);
}

const ThreadAttrs* current_attrs() {
  Worker* w = tl_worker;
  return w && w->current ? &w->current->attrs : nullptr;
}

void constant_array(const void* base, size_t bytes, int32_t elem_size, const char* name) {
  for (const Buffer& b : g_constant_arrays)
    if (b.base == base) return;
  char* p = const_cast<char*>(static_cast<const char*>(base));
  g_constant_arrays.push_back(Buffer{name, p, int64_t(bytes), p, elem_size, AS_CONSTANT, nullptr, -1, 0});
}

const Buffer* find_buffer(const void* p) {
  auto* c = static_cast<const char*>(p);
  for (const Buffer& b : g_constant_arrays)
    if (c >= b.base && c < b.base + b.bytes) return &b;
  Worker* w = tl_worker;
  if (!w) return nullptr;
  const LaunchParams* lp = w->launch->p;
  for (int i = 0; i < lp->nbuffers; ++i) {
    const Buffer& b = lp->buffers[i];
    if (c >= b.base && c < b.base + b.bytes) return &b;
  }
  for (const TgSlot& s : w->slots)
    if (s.storage && c >= s.buf.base && c < s.buf.base + s.buf.bytes) return &s.buf;
  if (w->dynamic.storage && c >= w->dynamic.buf.base && c < w->dynamic.buf.base + w->dynamic.buf.bytes)
    return &w->dynamic.buf;
  return nullptr;
}

// " at source line 3" where the site is in the candidate's own text (the header or the body)
std::string at_line(const Site& s) {
  if (!s.file || (std::strcmp(s.file, "source") != 0 && std::strcmp(s.file, "header") != 0)) return "";
  return fmt(" at %s line %u", s.file, s.line);
}

void settle_pending(Worker* w);

void fault_oob(const Buffer* buf, int64_t offset, size_t size, bool read_only, Site site) {
  Worker* w = tl_worker;
  const char* space = buf->space == AS_THREADGROUP ? "threadgroup" : buf->space == AS_CONSTANT ? "constant" : "device";
  int64_t index = offset >= 0 ? offset / int64_t(size) : -((-offset + int64_t(size) - 1) / int64_t(size));
  std::string what;
  if (int64_t(size) == buf->elem_size || buf->elem_size == 0) {
    what = fmt("%s[%lld] (%s buffer %s has %lld elements)", buf->name, (long long)index, space, buf->name,
               (long long)(buf->bytes / std::max<int64_t>(1, size)));
  } else {
    what = fmt("%s[%lld] through a %zu-byte element pointer (%s buffer %s has %lld bytes = %lld such elements, "
               "%lld of its own %d-byte type)",
               buf->name, (long long)index, size, space, buf->name, (long long)buf->bytes,
               (long long)(buf->bytes / int64_t(size)), (long long)(buf->bytes / buf->elem_size), buf->elem_size);
  }
  std::string msg = std::string("out-of-bounds ") + (read_only ? "read of " : "access to ") + what +
                    at_line(site) + (w ? who(w->current) : std::string());
  if (w) settle_pending(w), record_error(w->launch, msg);
  abort_lane();
}

void fault_misaligned(const Buffer* buf, int64_t offset, size_t size, size_t align) {
  fault(fmt("misaligned access to %s at byte %lld through a %zu-byte element pointer, which needs %zu-byte "
            "alignment (a GPU faults on it)", buf->name, (long long)offset, size, align).c_str());
}

void fault(const char* message) {
  Worker* w = tl_worker;
  if (!w) std::abort();  // only kernel code, which always runs on a worker, reaches here
  settle_pending(w);
  record_error(w->launch, std::string(message) + who(w->current));
  abort_lane();
}

void fault_index(const Buffer* buf, int64_t index, int64_t extent, Site site) {
  fault(fmt("out-of-bounds index %lld into threadgroup array %s (that dimension has %lld entries)%s", (long long)index,
            buf->name, (long long)extent, at_line(site).c_str()).c_str());
}

uint32_t current_threadgroup_tag() {
  Worker* w = tl_worker;
  return w ? w->tg_tag : 1;
}

void shared_output(const Buffer* buf, int64_t index, uint32_t other_tag) {
  Worker* w = tl_worker;
  if (w && w->launch->p->races_after) {  // an atomic on it may follow: judged after the launch
    __atomic_store_n(&buf->mask[index], kConflictTag, __ATOMIC_RELAXED);
    return;
  }
  uint32_t mine = w ? w->tg_tag : 1;
  fault(fmt("threadgroups %u and %u both access output %s[%lld] without atomics (linear threadgroup indices); "
            "threadgroups run concurrently on a GPU, so this is a race: give each output element one "
            "threadgroup, or set atomic_outputs and use atomic_* functions",
            other_tag - 1, mine - 1, buf->name, (long long)index).c_str());
}

namespace {

// Whether an access by a thread of SIMD-group `sg` (at its count of syncs `sg_epoch`) is ordered
// after one by a thread of `other` at `other_epoch`: the same SIMD-group, synchronised between.
[[gnu::always_inline]] inline bool ordered(uint32_t sg, uint64_t sg_epoch, uint32_t other, uint64_t other_epoch) {
  return sg == other && sg_epoch != other_epoch;
}

// The memory a shadowed buffer is, and the barrier that orders it, as the kernel's language names them.
const char* memory_of(const Buffer* buf) {
  if (cuda_names()) return "shared memory";
  return buf->space == AS_THREADGROUP ? "threadgroup memory" : "device memory";
}
std::string barrier_of(const Buffer* buf) {
  if (cuda_names()) return "__syncthreads()";
  return buf->space == AS_THREADGROUP ? "threadgroup_barrier(mem_flags::mem_threadgroup)"
                                      : "threadgroup_barrier(mem_flags::mem_device)";
}
// Two threads of one SIMD group (warp) are ordered by its own barrier: a __syncthreads() inside
// warp-synchronous code (`if (tid < 32)`) would hang the block.
std::string barrier_between(const Buffer* buf, uint32_t a, uint32_t b) {
  if (a / kSimdWidth != b / kSimdWidth || buf->space != AS_THREADGROUP) return barrier_of(buf);
  if (cuda_names()) return "__syncwarp() (the two are one warp: warp-synchronous code needs it since Volta)";
  return "simdgroup_barrier(mem_flags::mem_threadgroup)";
}
const char* group_word() { return cuda_names() ? "block" : "threadgroup"; }
uint32_t fence_of(const Buffer* buf) {
  return buf->space == AS_THREADGROUP ? kFenceThreadgroup : kFenceDevice;
}
[[gnu::always_inline]] inline uint64_t epoch_of(const Worker& w, const Buffer* buf) {
  return buf->space == AS_THREADGROUP ? w.epoch : w.device_epoch;
}

std::string read_then_written(const Shadow& s, uint32_t writer, const Site& wrote_at, const uint32_t* tg,
                              const Buffer* buf, int64_t e) {
  return fmt("threads %u and %u of %s %s race on %s %s[%lld]: thread %u read it (%s) and thread %u wrote "
             "it (%s) with no barrier between, so on a GPU the read may see either value; add %s between the "
             "read and the write",
             s.reader - 1, writer - 1, group_word(), pos3(tg).c_str(), memory_of(buf), buf->name, (long long)e,
             s.reader - 1, where(s.read_at).c_str(), writer - 1, where(wrote_at).c_str(),
             barrier_between(buf, s.reader - 1, writer - 1).c_str());
}

[[gnu::always_inline]] inline uint64_t element_bits(const Buffer* buf, int64_t e) {
  const int64_t es = std::max<int32_t>(buf->elem_size, 1);
  uint64_t bits = 0;
  std::memcpy(&bits, buf->base + e * es, size_t(std::min<int64_t>(es, 8)));
  return bits;
}
// The complement of an element's bits, within its width (element_bits reads at most 8 bytes).
uint64_t flipped(const Buffer* buf, uint64_t bits) {
  const int64_t es = std::max<int32_t>(buf->elem_size, 1);
  return es >= 8 ? ~bits : ~bits & ((uint64_t(1) << (8 * es)) - 1);
}
void set_element_bits(const Buffer* buf, int64_t e, uint64_t bits) {
  const int64_t es = std::max<int32_t>(buf->elem_size, 1);
  std::memcpy(buf->base + e * es, &bits, size_t(std::min<int64_t>(es, 8)));
}

// CUDA guarantees one of several writes to an element lands, so threads writing one value is no
// race there, but a read of another thread's write is. Which of the two a touch was shows once
// the toucher is done with it (touch, at a barrier, at a fault): the element then holds the
// complement of the write it found (a read), that write again (the same value), or another.
std::string settled(Shadow& s, const Buffer* buf, int64_t e, const uint32_t* tg) {
  s.pending = false;
  const uint64_t bits = element_bits(buf, e);
  if (bits == s.written) {
    s.wrote = true, s.wrote_at = s.site, s.wrote_sg_epoch = s.sg_epoch, s.bits = bits;
    return "";
  }
  const bool read = bits == flipped(buf, s.written);
  if (read) set_element_bits(buf, e, s.written);
  return fmt("threads %u and %u of %s %s race on %s %s[%lld]: thread %u wrote it (%s) and thread %u %s it (%s) with "
             "no barrier between, so on a GPU %s; add %s after the write",
             s.writer - 1, s.lane - 1, group_word(), pos3(tg).c_str(), memory_of(buf), buf->name, (long long)e,
             s.writer - 1, where(s.wrote_at).c_str(), s.lane - 1, read ? "read" : "wrote another value to",
             where(s.site).c_str(), read ? "the read may see either value" : "either value may be left",
             barrier_between(buf, s.writer - 1, s.lane - 1).c_str());
}

// CUDA: the last access of an element read every byte of it unwritten, as they still are.
std::string read_unwritten(const Shadow& s, const Buffer* buf, int64_t e, const uint32_t* tg) {
  if (!s.unwritten || !s.lane || !unwritten(buf->base, s.access_off, s.access_size)) return "";
  return fmt("thread %u of %s %s reads %s %s[%lld] (%s) that no thread of the %s had written: on a GPU it "
             "holds whatever was left there; write it, then %s, before reading it",
             s.lane - 1, group_word(), pos3(tg).c_str(), memory_of(buf), buf->name, (long long)e,
             where(s.site).c_str(), group_word(), barrier_of(buf).c_str());
}

// What a CUDA element's last access turned out to be, where that is a race or an unwritten read.
// `touching`: whether a thread touches the element now, rather than a barrier or a fault ending
// the interval. An unwritten read is judged only then: a touch may be `&a[i]` (taking an address
// reads nothing), and another thread may yet write the element, a race to name as one.
std::string settle(Worker& w, Shadow& s, const Buffer* buf, int64_t e, bool touching = false) {
  if (!s.lane) return "";
  const uint32_t* tg = w.lanes[s.lane - 1].attrs.threadgroup_position_in_grid;
  std::string race = s.pending ? settled(s, buf, e, tg) : "";
  return race.empty() && !touching ? read_unwritten(s, buf, e, tg) : race;
}

// What the last thread to touch an element did is known only at the next access: at a barrier
// (and at the end), an element whose value changed since its last access was written by that
// thread, which races with another thread's read of it in the same interval.
bool unseen_writes_race(Worker& w, uint32_t fence) {
  size_t kept = 0;
  for (const Touched& t : w.touched) {
    if (!(fence & fence_of(t.buf))) {  // not ordered by this barrier: still in its interval
      w.touched[kept++] = t;
      continue;
    }
    Shadow& s = *t.shadow;
    if (w.launch->p->cuda && t.buf->space == AS_THREADGROUP) {
      if (std::string bad = settle(w, s, t.buf, t.element); !bad.empty()) {
        record_error(w.launch, bad);
        return false;
      }
    }
    if (!s.reader || s.reader == s.lane || s.epoch != epoch_of(w, t.buf)) continue;
    const int64_t es = std::max<int32_t>(t.buf->elem_size, 1);
    uint64_t bits = 0;
    std::memcpy(&bits, t.buf->base + t.element * es, size_t(std::min<int64_t>(es, 8)));
    if (bits == s.bits || ordered(s.simdgroup, s.sg_epoch, s.reader_simdgroup, s.reader_sg_epoch)) continue;
    const uint32_t* tg = w.lanes[s.lane - 1].attrs.threadgroup_position_in_grid;
    record_error(w.launch, read_then_written(s, s.lane, s.site, tg, t.buf, t.element));
    return false;
  }
  w.touched.resize(kept);
  return true;
}

// One element's shadow at an access by the running thread (tg_touch, device_touch): touching what
// another thread wrote, or writing what another thread read, since the last barrier faults.
[[gnu::always_inline]] inline void touch(Worker* w, Shadow& s, const Buffer* buf, int64_t e, Site site, bool fresh = false, int64_t off = 0,
           int64_t size = 0) {
  const ThreadAttrs& a = w->current->attrs;
  const uint32_t lane = a.thread_index_in_threadgroup + 1, sg = a.simdgroup_index_in_threadgroup;
  const uint64_t sg_epoch = sg < w->sg_epochs.size() ? w->sg_epochs[sg] : 0;
  const bool cuda = w->launch->p->cuda && buf->space == AS_THREADGROUP;
  if (cuda && s.pending) [[unlikely]]
    if (std::string bad = settle(*w, s, buf, e, true); !bad.empty()) fault(bad.c_str());
  uint64_t bits = element_bits(buf, e);
  const bool changed = bits != s.bits;
  const uint64_t epoch = epoch_of(*w, buf);
  const bool now = s.lane && s.epoch == epoch;  // touched since the last barrier ordering it
  if (!now) {
    s.wrote = false, s.reader = 0;
    w->touched.push_back(Touched{&s, buf, e});
  } else if (s.lane == lane) {
    if (changed) {
      s.wrote = true, s.wrote_at = s.site, s.wrote_sg_epoch = s.sg_epoch;
      if (s.reader && s.reader != lane && !ordered(sg, sg_epoch, s.reader_simdgroup, s.reader_sg_epoch))
        fault(read_then_written(s, lane, s.site, a.threadgroup_position_in_grid, buf, e).c_str());
    }
  } else if (const bool last_wrote = changed && !ordered(sg, sg_epoch, s.simdgroup, s.sg_epoch);
             last_wrote || (s.wrote && !ordered(sg, sg_epoch, s.simdgroup, s.wrote_sg_epoch))) {
    // the last access wrote it, or an earlier one of the same thread with no SIMD-group sync since
    const Site wrote = last_wrote ? s.site : s.wrote_at;
    if (cuda) {  // a read or a write of the same value: settled at this thread's next step
      s.pending = true, s.writer = s.lane, s.written = bits, s.wrote_at = wrote;
      bits = flipped(buf, bits);
      set_element_bits(buf, e, bits);
    } else {
      fault(fmt("threads %u and %u of threadgroup %s race on %s %s[%lld]: thread %u wrote it (%s) and thread %u "
                "touched it (%s) with no threadgroup_barrier between (two threads writing one element race too, "
                "even with one value: let one thread write it); add %s after the write",
                s.lane - 1, lane - 1, pos3(a.threadgroup_position_in_grid).c_str(), memory_of(buf), buf->name,
                (long long)e, s.lane - 1, where(wrote).c_str(), lane - 1, where(site).c_str(),
                barrier_of(buf).c_str())
                .c_str());
    }
  } else {
    // the last thread read it: a write by another thread before the next barrier races with that read
    if ((!s.reader || s.reader == lane) && !ordered(sg, sg_epoch, s.simdgroup, s.sg_epoch))
      s.reader = s.lane, s.reader_simdgroup = s.simdgroup, s.reader_sg_epoch = s.sg_epoch, s.read_at = s.site;
    s.wrote = false;
  }
  s.lane = lane, s.simdgroup = sg, s.sg_epoch = sg_epoch, s.epoch = epoch, s.bits = bits, s.site = site;
  s.unwritten = fresh && !s.pending, s.access_off = off, s.access_size = int32_t(size);
}

}  // namespace

// Before a fault: a thread that read another's write in the same interval read the complement
// (settle's), or one that read unwritten memory the poison, which may be what made it fault: that
// is the error to name.
void settle_pending(Worker* w) {
  if (!w->launch->p->cuda) return;
  for (const Touched& t : w->touched)
    if (t.buf->space == AS_THREADGROUP)
      if (std::string bad = settle(*w, *t.shadow, t.buf, t.element); !bad.empty()) return record_error(w->launch, bad);
}

namespace {

}  // namespace

void tg_touch(const Buffer* buf, int64_t off, int64_t size, Site site) {
  Worker* w = tl_worker;
  if (!w || !w->current || !buf->mask) return;
  auto* shadow = reinterpret_cast<Shadow*>(buf->mask);
  const int64_t es = std::max<int32_t>(buf->elem_size, 1);
  if (w->counter) w->counter->tg_access(w->current->attrs, buf, off, size, site);
  const int64_t count = buf->bytes / es;
  // CUDA's original: a read of shared memory no thread wrote is told by the poison it still holds
  // (a byte alone may be data that equals it).
  const bool fresh = w->launch->p->cuda && size >= 2 && unwritten(buf->base, off, size);
  for (int64_t e = off / es; e <= (off + size - 1) / es && e < count; ++e)
    touch(w, shadow[e], buf, e, site, fresh, off, size);
}

void device_touch(const Buffer* buf, int64_t off, int64_t size, Site site) {
  Worker* w = tl_worker;
  if (!w || !w->current || w->group_threads < 2 || w->launch->p->cuda) return;
  const int64_t es = std::max<int32_t>(buf->elem_size, 1);
  const int64_t count = buf->bytes / es;
  for (int64_t e = off / es; e <= (off + size - 1) / es && e < count; ++e)
    touch(w, w->device_shadow[buf->base + e * es], buf, e, site);
}

void atomic_done(const void* cell) {
  Worker* w = tl_worker;
  if (!w || !w->current || !w->launch->p->cuda) return;
  const Buffer* buf = find_buffer(cell);
  if (!buf || buf->space != AS_THREADGROUP || !buf->mask) return;
  const int64_t e = (static_cast<const char*>(cell) - buf->base) / std::max<int32_t>(buf->elem_size, 1);
  Shadow& s = reinterpret_cast<Shadow*>(buf->mask)[e];
  if (s.lane == w->current->attrs.thread_index_in_threadgroup + 1) s.bits = element_bits(buf, e), s.unwritten = false;
}

void atomic_loaded(const void* cell) {
  Worker* w = tl_worker;
  if (!w || !w->current) return;
  Lane& l = *w->current;
  l.loaded[l.loaded_next++ % 4] = cell;
}

// A store to an atomic cell that the same thread loaded is a read-modify-write in two atomic
// operations: two threads doing it to one cell lose an update on a GPU, whatever order they ran in here.
void atomic_stored(const void* cell) {
  Worker* w = tl_worker;
  if (!w || !w->current) return;
  Lane& l = *w->current;
  if (std::find(std::begin(l.loaded), std::end(l.loaded), cell) == std::end(l.loaded)) return;
  const ThreadAttrs& a = l.attrs;
  const uint64_t group = a.threadgroup_position_in_grid[0] + uint64_t(a.threadgroups_per_grid[0]) *
      (a.threadgroup_position_in_grid[1] + uint64_t(a.threadgroups_per_grid[1]) * a.threadgroup_position_in_grid[2]);
  const uint64_t me = (group << 32) | a.thread_index_in_threadgroup;
  uint64_t other;
  {
    std::lock_guard<std::mutex> g(w->launch->updates_mu);
    auto [it, fresh] = w->launch->updates.emplace(cell, me);
    if (fresh || it->second == me) return;
    other = it->second;
  }
  const Buffer* buf = find_buffer(cell);
  long long index = buf ? (long long)((static_cast<const char*>(cell) - buf->base) / buf->elem_size) : -1;
  fault(fmt("thread %u of threadgroup %llu and thread %u of threadgroup %llu both update %s[%lld] with an "
            "atomic load and then an atomic store: the pair is not one atomic operation, so on a GPU one update "
            "is lost; use one atomic_fetch_*_explicit (or a compare-exchange loop)",
            unsigned(other & 0xFFFFFFFFu), (unsigned long long)(other >> 32), a.thread_index_in_threadgroup,
            (unsigned long long)group, buf ? buf->name : "a buffer", index).c_str());
}

void count_access(const Buffer* buf, int64_t offset, int64_t size, Site site) {
  Worker* w = tl_worker;
  if (!w || !w->counter || !w->current) return;
  const LaunchParams* p = w->launch->p;
  const ptrdiff_t index = buf - p->buffers;
  if (index >= 0 && index < p->nbuffers) w->counter->device_access(w->current->attrs, int(index), offset, size, site);
}

uint32_t current_simd_lane() {
  Worker* w = tl_worker;
  return w && w->current ? w->current->attrs.thread_index_in_simdgroup : 0;
}

}  // namespace mlxsim
