#pragma once
// Fresh nonces for the challenge-response handshakes (the node link's hello, the elastic
// join's greeting): 16 bytes from the kernel's CSPRNG (random_bytes.hpp), so a proof made for one connection is
// worth nothing for the next.
#include <string>
#include <string_view>

namespace hyrun {

/// 32 lower-case hex digits of fresh randomness. Throws SystemError naming `what` (whose
/// nonce) when the kernel has no bytes to give.
std::string new_nonce(std::string_view what);

}  // namespace hyrun
