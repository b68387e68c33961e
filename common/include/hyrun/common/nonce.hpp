#pragma once
// Fresh nonces for the challenge-response handshakes (the node link's hello, the elastic
// join's greeting): 16 bytes from OpenSSL's CSPRNG, so a proof made for one connection is
// worth nothing for the next.
#include <string>
#include <string_view>

namespace hyrun {

/// 32 lower-case hex digits of fresh randomness. Throws hyrun::Error naming `what` (whose
/// nonce) when the generator has no bytes to give.
std::string new_nonce(std::string_view what);

}  // namespace hyrun
