#include "hyrun/common/job_token.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun {

std::string make_job_token() {
  std::array<std::byte, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError("getrandom for the job token", errno);
    }
    got += static_cast<std::size_t>(n);
  }
  return to_hex(bytes);
}

}  // namespace hyrun
