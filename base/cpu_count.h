// The number of CPU cores this process may use, for sizing worker pools.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace tilesearch {

/// Cores this process may run on: the CPUs in its affinity mask (so `taskset -c 0-15` or a
/// cgroup cpuset limits every pool: compile workers, search threads, XGBoost threads), capped by
/// the environment variable TILESEARCH_THREADS when it holds a positive integer. Falls back to
/// std::thread::hardware_concurrency() when the mask cannot be read. Always ≥ 1.
inline int UsableCores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("TILESEARCH_THREADS")) {
    char* end = nullptr;
    const long cap = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && cap > 0) cores = std::min<long>(cores, cap);
  }
  return std::max(1, cores);
}

}  // namespace tilesearch
