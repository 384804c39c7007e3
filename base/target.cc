#include "base/target.h"

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tilesearch {

Target Target::H200() {
  Target t;
  t.kind = TargetKind::kCuda;
  t.arch = "sm_90";
  t.max_threads_per_block = 1024;
  t.max_shared_memory_per_block = 49152;
  t.max_shared_memory_optin = 232448;
  t.max_registers_per_block = 65536;
  t.warp_size = 32;
  t.max_vthread_extent = 8;
  t.max_vector_bytes = 16;
  t.sm_count = 132;
  t.l2_bytes = int64_t{60} * 1024 * 1024;
  return t;
}

Target Target::HostCpu() {
  Target t;
  t.kind = TargetKind::kCpu;
  t.arch = "x86-64";
  const unsigned cores = std::thread::hardware_concurrency();
  t.host_cores = cores == 0 ? 1 : static_cast<int>(cores);
  t.host_vector_bytes = 32;
  return t;
}

std::string Target::ToString() const {
  if (kind == TargetKind::kCuda) return absl::StrCat("cuda -arch=", arch);
  return "cpu";
}

absl::StatusOr<Target> ParseTarget(const std::string& text) {
  auto unknown = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown target '", text, "' (expected cuda[-arch=sm_XX] or cpu)"));
  };
  std::vector<std::string> words = absl::StrSplit(text, ' ', absl::SkipWhitespace());
  if (words.empty()) return unknown();
  auto is_arch = [](const std::string& a) {
    int n = 0;
    // sm_XX, or the arch-specific sm_XXa (wgmma needs sm_90a; modules that use it are compiled
    // for it from sm_90 too).
    std::string digits = a.size() > 3 ? a.substr(3) : "";
    if (!digits.empty() && digits.back() == 'a') digits.pop_back();
    return absl::StartsWith(a, "sm_") && !digits.empty() && absl::SimpleAtoi(digits, &n) && n > 0;
  };
  if (words.size() == 1 && (words[0] == "cpu" || words[0] == "llvm")) return Target::HostCpu();
  if (words.size() == 1 && is_arch(words[0])) {
    Target t = Target::H200();
    t.arch = words[0];
    return t;
  }
  if (words[0] != "cuda") return unknown();
  Target t = Target::H200();
  for (size_t i = 1; i < words.size(); ++i) {
    absl::string_view w = words[i];
    if (!absl::ConsumePrefix(&w, "-arch=") || !is_arch(std::string(w))) return unknown();
    t.arch = std::string(w);
  }
  return t;
}

}  // namespace tilesearch
