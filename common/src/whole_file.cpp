#include "hyrun/common/whole_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "hyrun/common/error.hpp"
#include "hyrun/common/unique_fd.hpp"

namespace hyrun {

namespace {

void write_all(int fd, std::string_view content, const std::string& path) {
  for (std::size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("writing {}", path), errno);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void put_whole_file(const std::string& dir, const std::string& name, std::string_view content) {
  const std::string final_path = dir + "/" + name;
  const std::string partial = dir + "/." + name + ".partial";
  try {
    UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) throw SystemError(fmt::format("creating {}", partial), errno);
    write_all(fd.get(), content, partial);
    if (::rename(partial.c_str(), final_path.c_str()) != 0)
      throw SystemError(fmt::format("renaming {} to {}", partial, name), errno);
  } catch (const SystemError&) {
    ::unlink(partial.c_str());
    throw;
  }
}

}  // namespace hyrun
