#include "hyrun/process/private_directory.hpp"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "hyrun/common/error.hpp"

namespace hyrun {

PrivateDirectory PrivateDirectory::create(const std::string& parent, const std::string& prefix) {
  const std::string pattern = parent + "/" + prefix + "-XXXXXX";
  std::string templ = pattern;  // mkdtemp writes into it, even when it fails
  if (::mkdtemp(templ.data()) == nullptr) throw SystemError("cannot create a private directory from " + pattern, errno);
  return PrivateDirectory(std::move(templ));
}

std::string PrivateDirectory::temporary_root() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

PrivateDirectory::~PrivateDirectory() { remove(); }

PrivateDirectory::PrivateDirectory(PrivateDirectory&& other) noexcept : path_(std::exchange(other.path_, {})) {}

PrivateDirectory& PrivateDirectory::operator=(PrivateDirectory&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

void PrivateDirectory::remove() noexcept {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) spdlog::warn("could not remove {}: {}", path_, ec.message());
  path_.clear();
}

}  // namespace hyrun
