#include "hyrun/link/link_seal.hpp"

#include <fmt/format.h>

#include <charconv>

#include "hyrun/common/hex.hpp"
#include "hyrun/common/nonce.hpp"

namespace hyrun {
namespace {

constexpr std::size_t kMacDigits = 32;  // 128 bits of the HMAC

}  // namespace

std::string new_link_nonce() { return new_nonce("the node link's nonce"); }

std::string link_hello_proof(const std::string& token, int task, int to, std::string_view nonce, LinkPurpose purpose) {
  return to_hex(hmac_sha256(token, fmt::format("{} {} to {}{} {}", kLinkHello, task, to,
                                               purpose == LinkPurpose::kDirectModex ? " direct-modex" : "", nonce)));
}

LinkSeal::LinkSeal(const std::string& token, int task, std::string_view nonce, Direction direction)
    : key_(hmac_sha256(token, fmt::format("{} key {} {}", kLinkHello, task, nonce))),
      direction_(direction == Direction::kToRoot ? "to-root" : "from-root") {}

std::string LinkSeal::mac(std::uint64_t seq, std::string_view body) const {
  return to_hex(hmac_sha256(key_, fmt::format("{} {} {}", direction_, seq, body))).substr(0, kMacDigits);
}

std::string LinkSeal::seal(std::string_view body) { return seal_head(body).append(body); }

std::string LinkSeal::seal_head(std::string_view body) {
  const std::uint64_t seq = next_++;
  return fmt::format("{} {} ", mac(seq, body), seq);
}

std::optional<std::string> LinkSeal::open(std::string_view line) {
  if (line.size() < kMacDigits + 2 || line[kMacDigits] != ' ') return std::nullopt;
  const std::string_view given = line.substr(0, kMacDigits);
  std::string_view rest = line.substr(kMacDigits + 1);
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::uint64_t seq = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + space, seq);
  if (error != std::errc() || end != rest.data() + space || seq != next_) return std::nullopt;
  const std::string_view body = rest.substr(space + 1);
  const std::string expected = mac(seq, body);
  if (!equal_in_constant_time(expected, given)) return std::nullopt;
  ++next_;
  return std::string(body);
}

}  // namespace hyrun
