// The part of libcu++ (namespace cuda::) kernels use for double buffering: a block-scope
// cuda::barrier and cuda::memcpy_async into shared memory. The copy is done at once, through the
// checked pointers (a GPU may finish it any time before the barrier's wait, so at once is one of
// its executions); arrive_and_wait is the block's barrier.
#pragma once

namespace cuda {

enum thread_scope { thread_scope_system, thread_scope_device, thread_scope_block, thread_scope_thread };

template <size_t Align>
struct aligned_size_t {
  size_t value;
  explicit constexpr aligned_size_t(size_t v) : value(v) {}
  constexpr operator size_t() const { return value; }
};

template <thread_scope Scope>
class barrier {
  static_assert(Scope == thread_scope_block, "the executor runs cuda::barrier of block scope only");

 public:
  barrier() = default;
  void arrive_and_wait(CUSIM_LOC) {
    if (expected_ != ptrdiff_t(::cusim::block_threads()))
      ::mlxsim::fault("a cuda::barrier expects another number of threads than the block has: the executor "
                      "runs one the whole block arrives at");
    __syncthreads(loc);
  }
  friend void init(barrier* b, ptrdiff_t expected) { b->expected_ = expected; }

 private:
  ptrdiff_t expected_ = 0;
};

template <class P>
::cusim::ptr<unsigned char> bytes_of(const P& p) {
  if constexpr (::cusim::is_checked_ptr<P>) return ::cusim::ptr<unsigned char>(p);
  else return ::cusim::ptr<unsigned char>(const_cast<unsigned char*>(reinterpret_cast<const volatile unsigned char*>(p)));
}

template <class D, class S, class B>
void memcpy_async(D dst, S src, size_t bytes, B&) {
  const ::cusim::ptr<unsigned char> to = bytes_of(dst);
  const ::cusim::ptr<unsigned char> from = bytes_of(src);
  for (size_t i = 0; i < bytes; ++i) to[i] = from[i];
}

}  // namespace cuda
