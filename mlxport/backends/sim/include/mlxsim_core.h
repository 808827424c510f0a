// What the simulators of every kernel language share, on top of the runtime's ABI: checked
// pointers (bounds, written masks, races between threadgroups, touched extents), threadgroup
// storage, and the rendezvous that SIMD-group (warp) collectives are built on.
#pragma once

#include <new>
#include <source_location>
#include <type_traits>

#include "mlxsim_abi.h"

namespace mlxsim {

using SrcLoc = std::source_location;

inline Site site_of(const SrcLoc& l) { return Site{l.file_name(), l.line(), l.column()}; }

// An index and the line it was written at (the default argument is evaluated where the index is
// converted, at the subscript): race reports name the lines of both accesses.
struct Subscript {
  int64_t i;
  SrcLoc loc;
  template <class I>
    requires std::is_convertible_v<I, int64_t>
  Subscript(I v, SrcLoc l = SrcLoc::current()) : i(int64_t(v)), loc(l) {}
};

// Whether T is an atomic cell (MSL's metal::atomic<T>): accesses through a pointer to one are atomic.
template <class T>
inline constexpr bool is_atomic_cell = false;

// ---------------------------------------------------------------- checked pointers

template <class T, int AS>
class Ptr {
  // Private, so that kernel code cannot reach around the checks through the raw address.
  T* p_ = nullptr;
  const Buffer* buf_ = nullptr;
  template <class, int>
  friend class Ptr;

 public:
  using element_type = T;
  // T& where T is a value: a struct's `void* data` member (ggml's) still makes a Ptr<void>.
  // The constant address space is read-only, as in Metal.
  using Ref = std::add_lvalue_reference_t<std::conditional_t<AS == AS_CONSTANT, const T, T>>;

  Ptr() = default;
  Ptr(std::nullptr_t) {}
  explicit Ptr(const Buffer* b) : p_(reinterpret_cast<T*>(b->data)), buf_(b) {}
  Ptr(T* raw, const Buffer* b) : p_(raw), buf_(b) {}
  // &x[i] and friends: find the buffer the address belongs to so checks continue.
  Ptr(T* raw) : p_(raw), buf_(raw ? find_buffer(raw) : nullptr) { keep_space(); }
  // A program-scope constant array (const in C++) or an address in one.
  Ptr(const std::remove_cv_t<T>* raw)
    requires(AS == AS_CONSTANT && !std::is_const_v<T>)
      : p_(const_cast<T*>(raw)), buf_(raw ? find_buffer(raw) : nullptr) {}
  // A cast of a plain address to another element type: still checked where it is in a buffer.
  template <class U>
    requires(!std::is_convertible_v<U*, T*>)
  explicit Ptr(U* raw) : p_((T*)(raw)), buf_(raw ? find_buffer(raw) : nullptr) { keep_space(); }
  // CUDA code rounds addresses as integers: reinterpret_cast<T*>(aligned_uintptr)
  explicit Ptr(uintptr_t addr)
    requires(AS == AS_GENERIC)
      : Ptr(reinterpret_cast<T*>(addr)) {}
  template <class U>
    requires std::is_convertible_v<U*, T*>
  Ptr(const Ptr<U, AS>& o) : p_(o.p_), buf_(o.buf_) {}
  // Casts such as (device float4*)x or reinterpret_cast: explicit, and still checked.
  template <class U, int AS2>
    requires(!(std::is_convertible_v<U*, T*> && AS2 == AS))
  explicit Ptr(const Ptr<U, AS2>& o) : p_((T*)(o.p_)), buf_(o.buf_) {
    static_assert(AS2 == AS || AS == AS_GENERIC || AS2 == AS_GENERIC,
                  "a cast between address spaces (device, constant, threadgroup): Metal converts no "
                  "pointer from one address space to another");
  }

  // Metal converts no pointer between address spaces, so a constant array's address never becomes
  // a device or threadgroup pointer (its storage is read-only: a write would kill the worker).
  void keep_space() const {
    if constexpr (AS != AS_CONSTANT && AS != AS_GENERIC)
      if (buf_ && buf_->space == AS_CONSTANT) [[unlikely]]
        fault(CONSTANT_CAST);
  }
  static constexpr const char* CONSTANT_CAST =
      "a pointer into a program-scope constant array cast to another address space: Metal converts no "
      "pointer between address spaces; read the array through a `constant` pointer";

  Ref operator[](Subscript s) const
    requires(AS != AS_GENERIC)
  {
    return at(s.i, s.loc);
  }
  // CUDA pointers also convert to plain ones: an exact match keeps p[i] from being ambiguous.
  template <class I>
    requires(std::is_convertible_v<I, int64_t> && AS == AS_GENERIC)
  Ref operator[](I i) const {
    return at(int64_t(i));
  }
  Ref operator*() const { return at(0); }
  T* operator->() const { return &at(0); }

  Ref at(int64_t i, const SrcLoc& loc = SrcLoc::current()) const {
    if (!buf_) {
      // A CUDA pointer may hold any address; an MSL one points into a buffer (a null one, or one
      // whose bits were made another way, is no address the checks know).
      if constexpr (AS == AS_GENERIC) return p_[i];
      else
        fault("an access through a device, constant or threadgroup pointer that points into no buffer (a null "
              "pointer, or one cast from the address of a thread's own variable)");
    }
    int64_t off = (reinterpret_cast<const char*>(const_cast<const std::remove_cv_t<T>*>(p_)) - buf_->base) + i * int64_t(sizeof(T));
    if (off < 0 || off + int64_t(sizeof(T)) > buf_->bytes) [[unlikely]]
      fault_oob(buf_, off, sizeof(T), std::is_const_v<T>, site_of(loc));
    if (off % int64_t(alignof(T)) != 0) [[unlikely]]
      fault_misaligned(buf_, off, sizeof(T), alignof(T));
    if (buf_->mask) [[unlikely]] {
      if (buf_->space == AS_THREADGROUP) {  // mask: the race shadow of threadgroup memory
        if constexpr (!is_atomic_cell<std::remove_cv_t<T>>) tg_touch(buf_, off, int64_t(sizeof(T)), site_of(loc));
      } else {  // an output: the threadgroups that touched it, and the race shadow of this one's threads
        if constexpr (!is_atomic_cell<std::remove_cv_t<T>>) device_touch(buf_, off, int64_t(sizeof(T)), site_of(loc));
        if constexpr (!std::is_const_v<T>) mark(off);
      }
    }
    if (buf_->touched >= 0) [[unlikely]]
      extend(off + int64_t(sizeof(T)));
    if (buf_->counted) [[unlikely]]
      count_access(buf_, off, int64_t(sizeof(T)), site_of(loc));
    return *reinterpret_cast<T*>(buf_->base + off);
  }

  template <class I>
    requires std::is_convertible_v<I, int64_t>
  Ptr operator+(I n) const {
    return Ptr(shifted(int64_t(n)), buf_);
  }
  template <class I>
    requires std::is_convertible_v<I, int64_t>
  friend Ptr operator+(I n, const Ptr& p) {
    return p + n;
  }
  template <class I>
    requires std::is_convertible_v<I, int64_t>
  Ptr operator-(I n) const {
    return Ptr(shifted(-int64_t(n)), buf_);
  }
  template <class U>
  ptrdiff_t operator-(const Ptr<U, AS>& o) const {
    return (reinterpret_cast<const char*>(const_cast<const std::remove_cv_t<T>*>(p_)) - reinterpret_cast<const char*>(const_cast<const std::remove_cv_t<T>*>(o.p_))) / ptrdiff_t(sizeof(T));
  }
  template <class I>
  Ptr& operator+=(I n) {
    p_ = shifted(int64_t(n));
    return *this;
  }
  template <class I>
  Ptr& operator-=(I n) {
    p_ = shifted(-int64_t(n));
    return *this;
  }
  Ptr& operator++() { return *this += 1; }
  Ptr& operator--() { return *this -= 1; }
  Ptr operator++(int) {
    Ptr t = *this;
    *this += 1;
    return t;
  }
  Ptr operator--(int) {
    Ptr t = *this;
    *this -= 1;
    return t;
  }
  explicit operator bool() const { return p_ != nullptr; }
  // CUDA code passes pointers on to functions that take plain ones; MSL pointers never convert.
  operator T*() const
    requires(AS == AS_GENERIC)
  {
    return p_;
  }
  template <class U>
  bool operator==(const Ptr<U, AS>& o) const {
    return static_cast<const void*>(p_) == static_cast<const void*>(o.p_);
  }
  bool operator==(std::nullptr_t) const { return p_ == nullptr; }
  template <class U>
  bool operator==(U* o) const {
    return static_cast<const void*>(p_) == static_cast<const void*>(o);
  }
  // (uintptr_t)p, as alignment tests do (`(size_t)p % 16`). A CUDA pointer's is its address. An
  // MSL pointer's is where it points in its buffer, above a base aligned to 256 bytes as MLX's
  // buffers are (buffer_address): never a host address, which could come back as a pointer out of
  // reach of the checks (no integer casts to one, anyway).
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
  explicit operator I() const {
    if constexpr (AS == AS_GENERIC) return I(addr());
    else return I(buffer_address());
  }
  template <class U>
  bool operator<(const Ptr<U, AS>& o) const {
    return addr() < o.addr();
  }
  template <class U>
  bool operator>(const Ptr<U, AS>& o) const {
    return addr() > o.addr();
  }
  template <class U>
  bool operator<=(const Ptr<U, AS>& o) const {
    return addr() <= o.addr();
  }
  template <class U>
  bool operator>=(const Ptr<U, AS>& o) const {
    return addr() >= o.addr();
  }
 private:
  uintptr_t addr() const { return reinterpret_cast<uintptr_t>(p_); }
  uint64_t buffer_address() const {
    if (!p_) return 0;
    if (!buf_) fault("the integer form of a pointer that points into no buffer");
    // A base mixed from where the host placed the buffer (ASLR and the allocator make it differ
    // run to run) and aligned to 256 bytes as MLX's are: no fixed pattern a kernel could
    // recognise the simulator by, and distinct buffers get distinct bases.
    uint64_t h = reinterpret_cast<uintptr_t>(buf_->base) ^ 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    const char* at = reinterpret_cast<const char*>(const_cast<const std::remove_cv_t<T>*>(p_));
    return (h & 0x0000ffffffffff00ull) + uint64_t(at - buf_->base);
  }
  T* shifted(int64_t n) const {
    return reinterpret_cast<T*>(reinterpret_cast<intptr_t>(p_) + n * intptr_t(sizeof(T)));
  }
  // Records which threadgroup touched each output element: a second threadgroup touching it
  // without atomics is a race on a GPU, where threadgroups run concurrently (here they may not).
  void mark(int64_t off) const {
    const int64_t es = buf_->elem_size;
    const int64_t first = off / es, last = (off + int64_t(sizeof(T)) - 1) / es;
    if constexpr (is_atomic_cell<std::remove_cv_t<T>>) {
      for (int64_t e = first; e <= last; ++e) __atomic_store_n(&buf_->mask[e], kAtomicTag, __ATOMIC_RELAXED);
    } else {
      const uint32_t me = current_threadgroup_tag();
      for (int64_t e = first; e <= last; ++e) {
        uint32_t cur = __atomic_load_n(&buf_->mask[e], __ATOMIC_RELAXED);
        if (cur == me) continue;
        if (cur == 0 && __atomic_compare_exchange_n(&buf_->mask[e], &cur, me, false, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED))
          continue;
        if (cur != me && cur != kAtomicTag && cur != kConflictTag) shared_output(buf_, e, cur);
      }
    }
  }
  void extend(int64_t end) const {
    auto* touched = const_cast<int64_t*>(&buf_->touched);
    int64_t cur = __atomic_load_n(touched, __ATOMIC_RELAXED);
    while (end > cur && !__atomic_compare_exchange_n(touched, &cur, end, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
  }
};

template <class T>
using device_ptr = Ptr<T, AS_DEVICE>;
template <class T>
using threadgroup_ptr = Ptr<T, AS_THREADGROUP>;

// ---------------------------------------------------------------- threadgroup storage

// A multi-dimensional `threadgroup T a[D0][D1]...` (CUDA: `__shared__`): every index is checked
// against its extent. It converts to a pointer in address space AS.
template <int AS, class T, size_t D0, size_t... Rest>
class TgArray {
  T* p_;
  const Buffer* buf_;

 public:
  TgArray(T* p, const Buffer* buf) : p_(p), buf_(buf) {}
  static constexpr size_t inner = (size_t(1) * ... * Rest);

  decltype(auto) operator[](Subscript s) const {
    int64_t k = s.i;
    if (k < 0 || k >= int64_t(D0)) [[unlikely]]
      fault_index(buf_, k, int64_t(D0), site_of(s.loc));
    T* q = p_ + k * int64_t(inner);
    if constexpr (sizeof...(Rest) == 0) {
      if constexpr (!is_atomic_cell<std::remove_cv_t<T>>) {
        if (buf_->mask) [[unlikely]]
          tg_touch(buf_, reinterpret_cast<const char*>(const_cast<const std::remove_cv_t<T>*>(q)) - buf_->base,
                   int64_t(sizeof(T)), site_of(s.loc));
      }
      return static_cast<T&>(*q);
    } else {
      return TgArray<AS, T, Rest...>{q, buf_};
    }
  }
  operator Ptr<T, AS>() const { return Ptr<T, AS>(p_, buf_); }
  // A row decays to a pointer into the array's address space: tile[y] + x.
  template <class I>
    requires(std::is_convertible_v<I, int64_t> && sizeof...(Rest) == 0)
  Ptr<T, AS> operator+(I i) const {
    return Ptr<T, AS>(p_, buf_) + int64_t(i);
  }
};

// Storage of a threadgroup array, shared by the threadgroup's lanes: slot numbers tell the
// declarations of a kernel apart.
template <int AS, class T, size_t... D>
auto tg_array_in(int slot, const char* name) {
  constexpr size_t n = (size_t(1) * ... * D);
  const Buffer* buf;
  bool fresh;
  T* p = static_cast<T*>(tg_alloc(slot, n * sizeof(T), alignof(T), name, int32_t(sizeof(T)), &buf, &fresh));
  if (fresh)
    for (size_t i = 0; i < n; ++i) ::new (const_cast<void*>(static_cast<const volatile void*>(p + i))) std::remove_cv_t<T>;
  if constexpr (sizeof...(D) == 1) return Ptr<T, AS>(p, buf);
  else return TgArray<AS, T, D...>{p, buf};
}

template <class T, size_t... D>
auto tg_array(int slot, const char* name) {
  return tg_array_in<AS_THREADGROUP, T, D...>(slot, name);
}

template <class T>
T* tg_scalar(int slot, const char* name) {
  const Buffer* buf;
  bool fresh;
  T* p = static_cast<T*>(tg_alloc(slot, sizeof(T), alignof(T), name, int32_t(sizeof(T)), &buf, &fresh));
  if (fresh) ::new (const_cast<void*>(static_cast<const volatile void*>(p))) std::remove_cv_t<T>;
  return p;
}

// ---------------------------------------------------------------- collectives

template <class T>
const T& in_of(const Exchange* ex, uint32_t k) {
  return *static_cast<const T*>(ex->in[k]);
}
template <class T>
T& out_of(const Exchange* ex, uint32_t k) {
  return *static_cast<T*>(ex->out[k]);
}
inline bool active(const Exchange* ex, uint32_t k) { return k < kSimdWidth && ((ex->mask >> k) & 1u); }

// Block until the lanes of this SIMD-group that are waiting at this call site are released;
// the first lane to resume computes every participant's result.
template <class R, class In, class F>
R collective(const In& in, const SrcLoc& loc, F&& compute) {
  R out{};
  Exchange* ex = simd_sync(&in, &out, site_of(loc));
  if (!ex->done) {
    ex->done = true;
    compute(ex);
  }
  return out;
}

template <uint32_t W, class T, class Op>
void reduce(Exchange* ex, Op op) {
  for (uint32_t base = 0; base < kSimdWidth; base += W) {
    bool have = false;
    T acc{};
    for (uint32_t j = base; j < base + W; ++j)
      if (active(ex, j)) {
        acc = have ? T(op(acc, in_of<T>(ex, j))) : in_of<T>(ex, j);
        have = true;
      }
    for (uint32_t j = base; j < base + W; ++j)
      if (active(ex, j)) out_of<T>(ex, j) = acc;
  }
}

template <uint32_t W, class T, class Op>
void scan(Exchange* ex, Op op, bool inclusive, T identity) {
  for (uint32_t base = 0; base < kSimdWidth; base += W) {
    T acc = identity;
    for (uint32_t j = base; j < base + W; ++j) {
      if (!active(ex, j)) continue;
      T next = T(op(acc, in_of<T>(ex, j)));
      out_of<T>(ex, j) = inclusive ? next : acc;
      acc = next;
    }
  }
}

template <class T>
struct WithArg {
  T value;
  int64_t arg;
};

// Each participant reads the value of a source lane of its segment (src returns -1 for none):
// a missing or inactive source leaves the lane's own value.
template <uint32_t W, class T, class Src>
void permute(Exchange* ex, Src src) {
  for (uint32_t j = 0; j < kSimdWidth; ++j) {
    if (!active(ex, j)) continue;
    const auto& me = in_of<WithArg<T>>(ex, j);
    uint32_t base = j - j % W;
    int64_t s = src(int64_t(j % W), me.arg);
    bool ok = s >= 0 && s < int64_t(W) && active(ex, base + uint32_t(s));
    out_of<T>(ex, j) = ok ? in_of<WithArg<T>>(ex, base + uint32_t(s)).value : me.value;
  }
}

template <class T>
struct Fill {
  T data;
  T filling;
  int64_t delta;
  int64_t modulo;
};

template <uint32_t W, class T>
void fill_shift(Exchange* ex, bool up) {
  for (uint32_t j = 0; j < kSimdWidth; ++j) {
    if (!active(ex, j)) continue;
    const auto& me = in_of<Fill<T>>(ex, j);
    int64_t mod = me.modulo > 0 ? me.modulo : int64_t(W);
    int64_t lane = int64_t(j % W), i = lane % mod, base = int64_t(j) - i;
    int64_t s = up ? i - me.delta : i + me.delta;
    bool from_fill = up ? s < 0 : s >= mod;
    int64_t src = base + (up ? (from_fill ? s + mod : s) : (from_fill ? s - mod : s));
    if (src < 0 || !active(ex, uint32_t(src))) {
      out_of<T>(ex, j) = me.data;
      continue;
    }
    const auto& other = in_of<Fill<T>>(ex, uint32_t(src));
    out_of<T>(ex, j) = from_fill ? other.filling : other.data;
  }
}

template <uint32_t W>
uint64_t segment_bits(const Exchange* ex, uint32_t j, bool (*pick)(const Exchange*, uint32_t)) {
  uint32_t base = j - j % W;
  uint64_t bits = 0;
  for (uint32_t k = base; k < base + W; ++k)
    if (active(ex, k) && pick(ex, k)) bits |= uint64_t(1) << (W == kSimdWidth ? k : k - base);
  return bits;
}

inline bool pick_true(const Exchange* ex, uint32_t k) { return in_of<bool>(ex, k); }
inline bool pick_any(const Exchange*, uint32_t) { return true; }

// Whether T is a checked pointer: its bits are no value a kernel may read.
template <class T>
inline constexpr bool is_checked_pointer = false;
template <class T, int AS>
inline constexpr bool is_checked_pointer<Ptr<T, AS>> = true;

// &r of a reference declared in an address space (the rewrite's): a checked pointer, as &p[i] is.
template <int AS, class T>
Ptr<T, AS> address_in(T* raw) {
  return Ptr<T, AS>(raw);
}

// What a C-style cast to a thread pointer, `(thread T*)x`, starts from (the simulator writes it
// `(T*)(::mlxsim::PtrOnly)x`): a pointer, never an integer, whose bits could be a buffer's
// address out of reach of the checks, and never the storage of a checked pointer, whose bits are
// that address. Both its pointee and the cast's are plain values (numbers, vectors, arrays of
// them): a struct, a lambda or a pointer may hold a pointer, whose bits read or written as numbers
// would be an address made around the checks.
template <class>
inline constexpr bool never = false;

// A struct whose members are all plain values, as the simulator's rewrite declares it inside the
// struct (`using mlxsim_plain = PlainOf<S, ...>`, a name no candidate may write): naming the
// struct itself, so a struct deriving from one, or aliasing another's, declares nothing.
template <class S, bool Plain>
struct PlainOf {};
template <class T, class = void>
struct declared_plain : std::false_type {};
template <class T>
struct declared_plain<T, std::void_t<typename T::mlxsim_plain>>
    : std::is_same<typename T::mlxsim_plain, PlainOf<T, true>> {};

// Specialised for the MSL value types by msl_runtime.h.
template <class T>
struct plain_value
    : std::bool_constant<std::is_arithmetic_v<T> || std::is_enum_v<T> || declared_plain<T>::value> {};
template <class T>
struct plain_value<const T> : plain_value<T> {};
template <class T>
struct plain_value<volatile T> : plain_value<T> {};
template <class T>
struct plain_value<const volatile T> : plain_value<T> {};
template <class T, size_t N>
struct plain_value<T[N]> : plain_value<T> {};
// (an array of const elements matches both the const and the array forms above)
template <class T, size_t N>
struct plain_value<const T[N]> : plain_value<T> {};
template <class T, size_t N>
struct plain_value<volatile T[N]> : plain_value<T> {};
template <class T, size_t N>
struct plain_value<const volatile T[N]> : plain_value<T> {};

struct PtrOnly {
  void* p;
  PtrOnly(std::nullptr_t) : p(nullptr) {}
  template <class U>
  PtrOnly(U* u) : p(const_cast<void*>(static_cast<const volatile void*>(u))) {
    if (const Buffer* b = u ? find_buffer(p) : nullptr; b && b->space == AS_CONSTANT) [[unlikely]]
      fault(Ptr<float, AS_DEVICE>::CONSTANT_CAST);
    static_assert(!is_checked_pointer<std::remove_cv_t<U>>,
                  "a thread pointer to a device, constant or threadgroup pointer's own storage: its bits "
                  "are an address out of reach of the checks");
    static_assert(is_checked_pointer<std::remove_cv_t<U>> || plain_value<U>::value,
                  "a thread pointer cast from a pointer to anything but a plain value (a number, a vector or "
                  "an array of them): a struct, lambda or pointer may hold an address, whose bits are out of "
                  "reach of the checks");
  }
  template <class I>
    requires std::is_integral_v<I>
  PtrOnly(I) : p(nullptr) {
    static_assert(never<I>, "an integer cast to a pointer: a Metal kernel's pointers have no integer form");
  }
  template <class U>
  explicit operator U*() const {
    static_assert(plain_value<U>::value,
                  "a cast to a thread pointer to anything but a plain value (a number, a vector or an array of "
                  "them): a pointer or a struct holding one would take its bits from numbers");
    return static_cast<U*>(p);
  }
};

}  // namespace mlxsim
