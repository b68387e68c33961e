#include "hyrun/common/job_token.hpp"

#include <array>

#include "hyrun/common/hex.hpp"
#include "hyrun/common/random_bytes.hpp"

namespace hyrun {

std::string make_job_token() {
  std::array<std::byte, 16> bytes{};
  fill_random(bytes, "the job token");
  return to_hex(bytes);
}

}  // namespace hyrun
