#include "hyrun/launcher/pending_directory.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "hyrun/common/error.hpp"
#include "hyrun/common/pending_environment.hpp"
#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

PendingDirectory PendingDirectory::create() {
  return PendingDirectory(PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-pending"));
}

void PendingDirectory::put(int rank, const std::vector<std::string>& entries) const {
  const std::string name = pending_environment_file(rank);
  const std::string final_path = path() + "/" + name;
  const std::string partial = path() + "/." + name + ".partial";
  const std::string content = format_pending_environment(entries);
  {
    UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) throw SystemError(fmt::format("creating {}", partial), errno);
    for (std::size_t done = 0; done < content.size();) {
      const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw SystemError(fmt::format("writing {}", partial), errno);
      done += static_cast<std::size_t>(n);
    }
  }
  if (::rename(partial.c_str(), final_path.c_str()) != 0)
    throw SystemError(fmt::format("renaming {} to {}", partial, name), errno);
}

}  // namespace hyrun
