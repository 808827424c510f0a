// What a counted launch (LaunchParams::count) saw a kernel do, for the cost estimate of
// mlxport/verify/estimate.py: the memory instructions each SIMD-group issued and the device-memory
// lines and threadgroup-memory banks their lanes touched. Included by the runtime only.
//
// Lanes run one after another here, so the instruction an access belongs to is reconstructed: the
// k-th access a lane makes at one source site is the same instruction as the k-th access of every
// other lane of its SIMD-group at that site (exact where the lanes do not diverge around it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "mlxsim_abi.h"

namespace mlxsim::counting {

// LaunchParams::counts, in this order (mlxport/backends/sim/counters.py names them).
enum Count : int {
  kDeviceInstructions,  // SIMD-group memory instructions on device buffers
  kDeviceLines,         // the lines each of them touched, summed
  kDeviceLaneAccesses,  // lanes taking part in them, summed
  kDeviceBytes,         // bytes the lanes asked for
  kDeviceUniqueLines,   // distinct lines the whole launch touched
  kTgInstructions,      // SIMD-group instructions on threadgroup memory
  kTgWavefronts,        // passes the banks needed for them (the most distinct words in one bank)
  kTgLaneAccesses,
  kTgBytes,
  kTgMemoryBytes,       // the most threadgroup memory one threadgroup declared
  kSimdgroups,          // SIMD-groups launched
  kLanes,               // threads launched
  kCounts
};
static_assert(kCounts == sizeof(LaunchParams::counts) / sizeof(int64_t), "one slot per count");

constexpr uint64_t kWordBits = (uint64_t(1) << 40) - 1;

struct Access {
  uint64_t site;
  uint32_t simdgroup;
  uint32_t occurrence;
  uint64_t where;  // device: buffer << 40 | line; threadgroup: word address

  bool operator<(const Access& o) const {
    if (site != o.site) return site < o.site;
    if (simdgroup != o.simdgroup) return simdgroup < o.simdgroup;
    if (occurrence != o.occurrence) return occurrence < o.occurrence;
    return where < o.where;
  }
  bool same_instruction(const Access& o) const {
    return site == o.site && simdgroup == o.simdgroup && occurrence == o.occurrence;
  }
};

inline uint64_t site_key(const Site& s) {
  uint64_t h = reinterpret_cast<uintptr_t>(s.file) * 0x9E3779B97F4A7C15ull;
  return h ^ (uint64_t(s.line) << 20) ^ uint64_t(s.column);
}

// One OS thread's counts; the launch adds them up.
struct Counter {
  int64_t line_bytes, banks, bank_bytes;
  uint64_t** unique;  // per buffer: a bit per line, shared by the launch's threads (atomic or)
  int64_t totals[kCounts]{};
  std::vector<std::vector<std::pair<uint64_t, uint32_t>>> sites;  // per lane: site -> accesses so far
  std::vector<Access> device, tg;

  void begin(size_t lanes) {
    if (sites.size() < lanes) sites.resize(lanes);
    for (auto& s : sites) s.clear();
  }

  uint32_t occurrence(uint32_t lane, uint64_t site) {
    for (auto& [key, n] : sites[lane])
      if (key == site) return n++;
    sites[lane].emplace_back(site, 1);
    return 0;
  }

  void device_access(const ThreadAttrs& a, int buffer, int64_t off, int64_t size, const Site& at) {
    const uint64_t site = site_key(at);
    const uint32_t k = occurrence(a.thread_index_in_threadgroup, site);
    for (int64_t line = off / line_bytes; line <= (off + size - 1) / line_bytes; ++line) {
      device.push_back({site, a.simdgroup_index_in_threadgroup, k, uint64_t(buffer) << 40 | uint64_t(line)});
      __atomic_fetch_or(&unique[buffer][line / 64], uint64_t(1) << (line % 64), __ATOMIC_RELAXED);
    }
    totals[kDeviceLaneAccesses] += 1;
    totals[kDeviceBytes] += size;
  }

  // where: the word's offset in its array (arrays start at bank 0), under the array's tag
  void tg_access(const ThreadAttrs& a, const Buffer* array, int64_t off, int64_t size, const Site& at) {
    const uint64_t site = site_key(at);
    const uint32_t k = occurrence(a.thread_index_in_threadgroup, site);
    const uint64_t tag = (reinterpret_cast<uintptr_t>(array) >> 4 & 0xFFFFFF) << 40;
    for (int64_t word = off / bank_bytes; word <= (off + size - 1) / bank_bytes; ++word)
      tg.push_back({site, a.simdgroup_index_in_threadgroup, k, tag | uint64_t(word)});
    totals[kTgLaneAccesses] += 1;
    totals[kTgBytes] += size;
  }

  // Every lane of each SIMD-group counted so far is past the accesses recorded: group them into
  // instructions.
  void flush() {
    std::sort(device.begin(), device.end());
    for (size_t i = 0; i < device.size(); ++i) {
      if (i == 0 || !device[i].same_instruction(device[i - 1])) ++totals[kDeviceInstructions];
      if (i == 0 || !device[i].same_instruction(device[i - 1]) || device[i].where != device[i - 1].where)
        ++totals[kDeviceLines];
    }
    device.clear();
    std::sort(tg.begin(), tg.end());
    std::vector<int64_t> per_bank(size_t(banks), 0);
    for (size_t i = 0; i < tg.size();) {
      size_t j = i;
      std::fill(per_bank.begin(), per_bank.end(), 0);
      for (; j < tg.size() && tg[j].same_instruction(tg[i]); ++j)
        if (j == i || tg[j].where != tg[j - 1].where) ++per_bank[(tg[j].where & kWordBits) % uint64_t(banks)];  // a broadcast is one word
      totals[kTgInstructions] += 1;
      totals[kTgWavefronts] += *std::max_element(per_bank.begin(), per_bank.end());
      i = j;
    }
    tg.clear();
  }

  void end_threadgroup(size_t lanes, size_t tg_bytes) {
    flush();
    totals[kSimdgroups] += int64_t((lanes + kSimdWidth - 1) / kSimdWidth);
    totals[kLanes] += int64_t(lanes);
    totals[kTgMemoryBytes] = std::max<int64_t>(totals[kTgMemoryBytes], int64_t(tg_bytes));
  }
};

// The launch's bitmaps of touched lines, one per device buffer that is counted.
struct Unique {
  std::vector<std::vector<uint64_t>> bits;
  std::vector<uint64_t*> rows;

  Unique(const LaunchParams* p) : bits(size_t(p->nbuffers)), rows(size_t(p->nbuffers), nullptr) {
    for (int i = 0; i < p->nbuffers; ++i)
      if (p->buffers[i].counted) {
        bits[size_t(i)].assign(size_t(p->buffers[i].bytes / p->count_line_bytes / 64 + 2), 0);
        rows[size_t(i)] = bits[size_t(i)].data();
      }
  }
  int64_t lines() const {
    int64_t n = 0;
    for (const auto& b : bits)
      for (uint64_t w : b) n += __builtin_popcountll(w);
    return n;
  }
};

}  // namespace mlxsim::counting
