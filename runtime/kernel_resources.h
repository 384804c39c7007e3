// What the driver reports about one compiled GPU kernel (cuFuncGetAttribute), kept with each
// measurement.
#pragma once

#include <cstdint>
#include <string>

namespace tilesearch::runtime {

/// Resources of one compiled GPU kernel as the driver reports them (cuFuncGetAttribute).
struct KernelResources {
  std::string name;
  int registers_per_thread = 0;
  int64_t static_shared_bytes = 0;
  int64_t dynamic_shared_bytes = 0;
  int64_t local_bytes_per_thread = 0;  // spills and local arrays
  int max_threads_per_block = 0;       // the most this kernel can launch with
};

}  // namespace tilesearch::runtime
