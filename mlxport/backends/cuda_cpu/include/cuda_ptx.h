// Inline PTX for mlxport's CPU executor: what mlxport/backends/cuda_cpu/ptx.py turns an asm
// statement of its subset into. Every register is 64 bits of a number, or an address (a checked
// pointer, never a number): loads and stores go through ::cusim::ptr, so bounds, alignment of the
// whole vector, written masks and races are judged as for C++ accesses. What is outside the subset
// stops the thread when it runs, naming the instruction.
#pragma once

namespace cusim::ptx {

constexpr uint64_t mask(int bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

[[noreturn]] inline void fail(const char* what, const char* why) {
  char msg[640];
  size_t n = 0;
  for (const char* s = what; *s && n + 1 < sizeof msg; ++s) msg[n++] = *s;
  for (const char* s = why; *s && n + 1 < sizeof msg; ++s) msg[n++] = *s;
  msg[n] = 0;
  ::mlxsim::fault(msg);
}

[[noreturn]] inline void unsupported(const char* sentence) { ::mlxsim::fault(sentence); }

struct Reg {
  uint64_t bits = 0;
  ptr<const unsigned char> addr{};  // an address operand: the pointer, checked
  bool writable = false;
  int kind = 0;  // 0 a number, 1 an address, 2 a value of no register's size

  uint64_t value(const char* what) const {
    if (kind != 0)
      fail(what, " is a pointer (or a value of another size) read as a number: the executor never turns "
                 "addresses into numbers");
    return bits;
  }
};

template <class T>
T as(uint64_t bits) {
  T t;
  __builtin_memcpy(&t, &bits, sizeof(T));
  return t;
}

// An input operand: a pointer stays one; a number becomes the register's bits.
template <int Bits, class V>
Reg in(const V& v) {
  using D = std::remove_cvref_t<V>;
  Reg r;
  if constexpr (is_checked_ptr<D>) {
    r.addr = ptr<const unsigned char>(v);
    r.writable = !std::is_const_v<typename D::element_type>;
    r.kind = 1;
  } else if constexpr (std::is_pointer_v<D> && !std::is_function_v<std::remove_pointer_t<D>>) {
    r.addr = ptr<const unsigned char>(v);
    r.writable = !std::is_const_v<std::remove_pointer_t<D>>;
    r.kind = 1;
  } else if constexpr (std::is_integral_v<D> || std::is_enum_v<D>) {
    r.bits = uint64_t(int64_t(v)) & mask(Bits);
  } else if constexpr (std::is_trivially_copyable_v<D> && sizeof(D) * 8 == Bits) {
    __builtin_memcpy(&r.bits, &v, sizeof(D));
  } else {
    r.kind = 2;
  }
  return r;
}

// An output operand, written after the statement as GCC writes them.
template <int Bits, class L>
void out(L& dst, const Reg& r, const char* what) {
  using D = std::remove_cv_t<L>;
  constexpr const char* why = " writes a register into a pointer or a value of another size";
  if constexpr (is_checked_ptr<D> || std::is_pointer_v<D>) {
    fail(what, why);
  } else if constexpr (std::is_integral_v<D> || std::is_enum_v<D>) {
    dst = static_cast<D>(r.value(what) & mask(Bits));
  } else if constexpr (std::is_trivially_copyable_v<D> && sizeof(D) * 8 == Bits) {
    const uint64_t b = r.value(what);
    __builtin_memcpy(static_cast<void*>(&dst), &b, sizeof(D));
  } else {
    fail(what, why);
  }
}

// cvt between numbers: a float to an integer rounded by M and saturated (NaN to 0), as
// __float2int_rn and friends; an integer or float to a float at nearest; an integer to another
// wrapping. Integers come back sign- or zero-extended to the register.
template <class D, class S, ::cusim::values::rnd M>
uint64_t cvt(uint64_t bits) {
  const S x = as<S>(bits);
  if constexpr (std::is_floating_point_v<D>) {
    const D d = D(x);
    uint64_t out = 0;
    __builtin_memcpy(&out, &d, sizeof(D));
    return out;
  } else {
    D d;
    if constexpr (std::is_floating_point_v<S>) d = ::cusim::values::to_int<D, M>(double(x));
    else d = D(x);
    return std::is_signed_v<D> ? uint64_t(int64_t(d)) : uint64_t(d);
  }
}

template <class E, int N>
struct alignas(sizeof(E) * N) Vec {
  E e[N];
};

constexpr const char* kNotAnAddress =
    " takes its address from an operand that is not a pointer the executor checks (an integer, or a "
    "32-bit shared-window address from __cvta_generic_to_shared): pass the pointer itself with \"l\"";

// __cvta_generic_to_shared gives the low 32 bits of a shared address; the high ones are kept here
// (the block's shared storage is the executor's, near each other), and an ld.shared or st.shared
// of such a number reaches memory only where it lands in the block's shared storage, checked.
inline thread_local uintptr_t shared_window = 0;

inline size_t to_shared(uintptr_t address) {
  shared_window = address & ~uintptr_t(0xFFFFFFFFu);
  return size_t(address & 0xFFFFFFFFu);
}

inline ptr<const unsigned char> address(const Reg& a, bool shared, const char* what) {
  if (a.kind == 1) return a.addr;
  if (a.kind == 0 && shared && shared_window != 0) {
    auto* raw = reinterpret_cast<const unsigned char*>(shared_window | (a.bits & 0xFFFFFFFFu));
    const ::mlxsim::Buffer* b = ::mlxsim::find_buffer(raw);
    if (b != nullptr && b->space == ::mlxsim::AS_THREADGROUP) return ptr<const unsigned char>(raw, b);
  }
  fail(what, kNotAnAddress);
}

template <class E, int N, bool Shared>
void ld(const Reg& a, int64_t offset, const char* what, Reg* const (&dst)[N]) {
  const Vec<E, N> v = ptr<const Vec<E, N>>(address(a, Shared, what) + offset)[0];
  for (int i = 0; i < N; ++i) {
    if constexpr (std::is_integral_v<E> && std::is_signed_v<E>) {
      dst[i]->bits = uint64_t(int64_t(v.e[i]));
    } else {
      dst[i]->bits = 0;
      __builtin_memcpy(&dst[i]->bits, &v.e[i], sizeof(E));
    }
    dst[i]->kind = 0;
  }
}

template <class E, int N, bool Shared>
void st(const Reg& a, int64_t offset, const char* what, const uint64_t (&vals)[N]) {
  const ptr<const unsigned char> at = address(a, Shared, what);
  if (a.kind == 1 && !a.writable) fail(what, " stores through a pointer to const data");
  Vec<E, N> v;
  for (int i = 0; i < N; ++i) __builtin_memcpy(&v.e[i], &vals[i], sizeof(E));
  ptr<Vec<E, N>>(at + offset)[0] = v;
}

}  // namespace cusim::ptx

template <class T>
size_t __cvta_generic_to_shared(::cusim::ptr<T> p) {
  return ::cusim::ptx::to_shared(uintptr_t(p));
}
inline size_t __cvta_generic_to_shared(const volatile void* p) {
  return ::cusim::ptx::to_shared(reinterpret_cast<uintptr_t>(p));
}
