#include "hyrun/launcher/node_link_lines.hpp"

#include <charconv>

namespace hyrun {
namespace {

constexpr std::size_t kMaxWord = 128;

// The next word of `rest` (up to a space or the end), removed from it with its one space.
std::string_view take_word(std::string_view& rest) {
  const auto space = rest.find(' ');
  const std::string_view word = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  return word;
}

// A task number: decimal digits only, all of them, within int. sscanf's %d took a sign,
// stopped at the first non-digit and wrapped an overflow into another task.
std::optional<int> parse_task(std::string_view word) {
  if (word.empty() || word.front() < '0' || word.front() > '9') return std::nullopt;
  int task = 0;
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), task);
  if (error != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return task;
}

}  // namespace

std::optional<LinkHello> parse_link_hello(std::string_view line) {
  if (!line.starts_with(kLinkHello) || line.substr(kLinkHello.size(), 1) != " ") return std::nullopt;
  std::string_view rest = line.substr(kLinkHello.size() + 1);
  const auto task = parse_task(take_word(rest));
  const std::string_view nonce = take_word(rest);
  const std::string_view proof = rest;
  const bool hex_nonce = nonce.size() == 32 && nonce.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!task || !hex_nonce || proof.empty() || proof.size() > kMaxWord || proof.find(' ') != std::string_view::npos)
    return std::nullopt;
  return LinkHello{*task, std::string(nonce), std::string(proof)};
}

std::optional<LinkLoss> parse_link_loss(std::string_view line) {
  constexpr std::string_view kLost = "lost ";
  if (!line.starts_with(kLost)) return std::nullopt;
  std::string_view rest = line.substr(kLost.size());
  const auto task = parse_task(take_word(rest));
  const std::string_view host = take_word(rest);
  if (!task || host.empty() || host.size() > kMaxWord) return std::nullopt;
  return LinkLoss{*task, std::string(host), std::string(rest)};
}

}  // namespace hyrun
