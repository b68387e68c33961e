#pragma once
// Fresh randomness from the kernel's CSPRNG (getrandom(2)): job tokens and handshake
// nonces. A system call, with no library state to set up in each process.
#include <cstddef>
#include <span>
#include <string_view>

namespace hyrun {

/// Fills `out` with random bytes. Throws SystemError naming `what` (whose bytes) when the
/// kernel gives none.
void fill_random(std::span<std::byte> out, std::string_view what);

}  // namespace hyrun
