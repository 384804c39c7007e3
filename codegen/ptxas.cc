#include "codegen/ptxas.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/status.h"
#include "base/write_file.h"

namespace tilesearch::codegen {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InternalError(absl::StrCat("cannot read '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::optional<std::string> FindPtxas() {
  if (const char* env = std::getenv("TILESEARCH_PTXAS"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string candidate = absl::StrCat(std::string(dir), "/ptxas");
      if (IsExecutableFile(candidate)) return candidate;
    }
  }
  if (IsExecutableFile("/usr/local/cuda/bin/ptxas"))
    return std::string("/usr/local/cuda/bin/ptxas");
  return std::nullopt;
}

absl::StatusOr<std::string> AssemblePtx(const std::string& ptxas, const std::string& ptx,
                                        const std::string& arch) {
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "tilesearch-ptxas-XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a temporary directory: ", std::strerror(errno)));
  }
  const std::string dir = dir_template;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string in = dir + "/kernel.ptx";
  const std::string out = dir + "/kernel.cubin";
  const std::string log = dir + "/ptxas.log";
  RETURN_IF_ERROR(WriteFile(in, ptx));
  const std::string arch_flag = "-arch=" + arch;
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const char* argv[] = {ptxas.c_str(), arch_flag.c_str(), "-o", out.c_str(), in.c_str(), nullptr};
    ::execvp(ptxas.c_str(), const_cast<char* const*>(argv));
    const char kMessage[] = "cannot run ptxas\n";
    [[maybe_unused]] ssize_t n = ::write(2, kMessage, sizeof(kMessage) - 1);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    absl::StatusOr<std::string> text = ReadFile(log);
    std::string message = text.ok() ? *text : "";
    while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
      message.pop_back();
    }
    const std::string how = WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status))
                                              : absl::StrCat("signal ", WTERMSIG(status));
    return absl::InternalError(
        absl::StrCat(ptxas, " ", arch_flag, " failed (", how, "): ", message.substr(0, 2000)));
  }
  return ReadFile(out);
}

}  // namespace tilesearch::codegen
