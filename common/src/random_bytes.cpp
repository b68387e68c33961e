#include "hyrun/common/random_bytes.hpp"

#include <fmt/format.h>
#include <sys/random.h>

#include <cerrno>

#include "hyrun/common/error.hpp"

namespace hyrun {

void fill_random(std::span<std::byte> out, std::string_view what) {
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("getrandom for {}", what), errno);
    }
    got += static_cast<std::size_t>(n);
  }
}

}  // namespace hyrun
