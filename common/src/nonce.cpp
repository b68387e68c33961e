#include "hyrun/common/nonce.hpp"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <span>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun {

std::string new_nonce(std::string_view what) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw Error(fmt::format("no random bytes for {} (OpenSSL RAND_bytes)", what));
  return to_hex(std::as_bytes(std::span(bytes)));
}

}  // namespace hyrun
