#include "hyrun/link/link_message.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <span>
#include <utility>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"

namespace hyrun {
namespace {

constexpr std::size_t kMaxWord = 128;

constexpr std::array<LinkKindInfo, 12> kKinds{{
    {LinkKind::kAlive, "alive", "both"},
    {LinkKind::kBye, "bye", "both"},
    {LinkKind::kLost, "lost", "both"},
    {LinkKind::kFence, "fence", "a node"},
    {LinkKind::kFenced, "fenced", "root"},
    {LinkKind::kFenceFailed, "fence-failed", "both"},
    {LinkKind::kDmodexGet, "dmodex-get", "both"},
    {LinkKind::kDmodexData, "dmodex-data", "both"},
    {LinkKind::kDmodexNone, "dmodex-none", "both"},
    {LinkKind::kMore, "more", "both"},
    {LinkKind::kCosts, "costs", "a node"},
    {LinkKind::kEnded, "ended", "a node"},
}};

// The next word of `rest` (up to a space or the end), removed from it with its one space.
std::string_view take_word(std::string_view& rest) {
  const auto space = rest.find(' ');
  const std::string_view word = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  return word;
}

// A number of type T: decimal digits only, all of them, within T. (sscanf's %d took a sign,
// stopped at the first non-digit and wrapped an overflow into another task.)
template <class T>
std::optional<T> parse_number(std::string_view word) {
  if (word.empty() || word.front() < '0' || word.front() > '9') return std::nullopt;
  T value{};
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (error != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return value;
}

std::optional<std::string> parse_bytes(std::string_view hex) {
  try {
    const auto bytes = from_hex(hex, "the node link's data");
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string hex_of(std::string_view bytes) {
  return to_hex(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
}

// The fields after `kind`'s word, or nullopt when `body` is not of that kind. A kind with
// fields takes exactly one space after its word.
std::optional<std::string_view> fields_of(std::string_view body, LinkKind kind) {
  const std::string_view word = link_kind_word(kind);
  if (!body.starts_with(word) || body.size() <= word.size() || body[word.size()] != ' ') return std::nullopt;
  return body.substr(word.size() + 1);
}

}  // namespace

std::span<const LinkKindInfo> link_kinds() { return kKinds; }

std::optional<LinkKind> link_kind_of(std::string_view body) {
  const std::string_view word = body.substr(0, body.find(' '));
  for (const auto& k : kKinds)
    if (k.word == word) return k.kind;
  return std::nullopt;
}

std::string_view link_kind_word(LinkKind kind) {
  for (const auto& k : kKinds)
    if (k.kind == kind) return k.word;
  return "?";
}

std::string format_link(const LinkHello& m) { return fmt::format("{} {} {} {}", kLinkHello, m.task, m.nonce, m.proof); }
std::string format_link(const LinkLoss& m) {
  return fmt::format("{} {} {} {} {}", link_kind_word(m.kKind), m.task, m.reporter, m.host, m.why);
}
std::string format_link(const LinkDmodexGet& m) {
  return fmt::format("{} {} {}", link_kind_word(m.kKind), m.id, m.rank);
}
std::string format_link(const LinkDmodexNone& m) { return fmt::format("{} {}", link_kind_word(m.kKind), m.id); }
std::string format_link(const LinkFenceFailed& m) {
  return fmt::format("{} {} {}", link_kind_word(m.kKind), m.number, m.why);
}
std::string format_link(const LinkMore& m) { return fmt::format("{} {}", link_kind_word(m.kKind), hex_of(m.data)); }
std::string format_link(const LinkCosts& m) {
  return fmt::format("{} {} {} {} {} {} {} {}", link_kind_word(m.kKind), m.task, m.cpu_us, m.helper_cpu_us, m.link_sent,
                     m.link_received, m.fences, m.fence_bytes);
}
std::string format_link(const LinkEnded& m) { return fmt::format("{} {}", link_kind_word(m.kKind), m.task); }

namespace link_detail {

std::string format_numbered_bytes(LinkKind kind, std::uint64_t number, const std::string& data) {
  return fmt::format("{} {} {}", link_kind_word(kind), number, hex_of(data));
}

std::vector<std::string> format_pieces(LinkKind kind, std::uint64_t number, std::string_view data) {
  std::vector<std::string> bodies;
  bodies.reserve(data.size() / kLinkPieceBytes + 1);
  while (data.size() > kLinkPieceBytes) {
    bodies.push_back(fmt::format("{} {}", link_kind_word(LinkKind::kMore), hex_of(data.substr(0, kLinkPieceBytes))));
    data.remove_prefix(kLinkPieceBytes);
  }
  bodies.push_back(fmt::format("{} {} {}", link_kind_word(kind), number, hex_of(data)));
  return bodies;
}

// "<word> <number> <hex>": the hex after exactly one space (no data: the line ends with it).
std::optional<std::pair<std::uint64_t, std::string>> parse_numbered_bytes(std::string_view body, LinkKind kind) {
  const auto rest = fields_of(body, kind);
  if (!rest) return std::nullopt;
  const auto space = rest->find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto number = parse_number<std::uint64_t>(rest->substr(0, space));
  auto bytes = parse_bytes(rest->substr(space + 1));
  if (!number || !bytes) return std::nullopt;
  return std::make_pair(*number, std::move(*bytes));
}

std::optional<LinkHello> parse_hello(std::string_view line) {
  if (!line.starts_with(kLinkHello) || line.substr(kLinkHello.size(), 1) != " ") return std::nullopt;
  std::string_view rest = line.substr(kLinkHello.size() + 1);
  const auto task = parse_number<int>(take_word(rest));
  const std::string_view nonce = take_word(rest);
  const std::string_view proof = rest;
  const bool hex_nonce = nonce.size() == 32 && nonce.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!task || !hex_nonce || proof.empty() || proof.size() > kMaxWord || proof.find(' ') != std::string_view::npos)
    return std::nullopt;
  return LinkHello{*task, std::string(nonce), std::string(proof)};
}

std::optional<LinkLoss> parse_loss(std::string_view body) {
  auto rest = fields_of(body, LinkKind::kLost);
  if (!rest) return std::nullopt;
  const auto task = parse_number<int>(take_word(*rest));
  const auto reporter = parse_number<int>(take_word(*rest));
  const std::string_view host = take_word(*rest);
  if (!task || !reporter || host.empty() || host.size() > kMaxWord) return std::nullopt;
  return LinkLoss{*task, *reporter, std::string(host), std::string(*rest)};
}

std::optional<LinkDmodexGet> parse_dmodex_get(std::string_view body) {
  auto rest = fields_of(body, LinkKind::kDmodexGet);
  if (!rest) return std::nullopt;
  const auto id = parse_number<std::uint64_t>(take_word(*rest));
  const auto rank = parse_number<std::uint32_t>(*rest);
  if (!id || !rank) return std::nullopt;
  return LinkDmodexGet{*id, *rank};
}

std::optional<LinkFenceFailed> parse_fence_failed(std::string_view body) {
  auto rest = fields_of(body, LinkKind::kFenceFailed);
  if (!rest) return std::nullopt;
  const auto number = parse_number<std::uint64_t>(take_word(*rest));
  if (!number || rest->empty() || rest->size() > kLinkMaxWhy) return std::nullopt;
  return LinkFenceFailed{*number, std::string(*rest)};
}

std::optional<LinkMore> parse_more(std::string_view body) {
  const auto hex = fields_of(body, LinkKind::kMore);
  if (!hex || hex->empty() || hex->size() > 2 * kLinkPieceBytes) return std::nullopt;
  auto bytes = parse_bytes(*hex);
  if (!bytes) return std::nullopt;
  return LinkMore{std::move(*bytes)};
}

std::optional<LinkDmodexNone> parse_dmodex_none(std::string_view body) {
  const auto rest = fields_of(body, LinkKind::kDmodexNone);
  const auto id = rest ? parse_number<std::uint64_t>(*rest) : std::nullopt;
  if (!id) return std::nullopt;
  return LinkDmodexNone{*id};
}

std::optional<LinkCosts> parse_costs(std::string_view body) {
  auto rest = fields_of(body, LinkKind::kCosts);
  if (!rest || body.ends_with(' ')) return std::nullopt;  // take_word would drop a last space
  const auto task = parse_number<int>(take_word(*rest));
  if (!task) return std::nullopt;
  std::array<std::uint64_t, 6> values{};
  for (auto& value : values) {
    const auto number = parse_number<std::uint64_t>(take_word(*rest));
    if (!number) return std::nullopt;
    value = *number;
  }
  if (!rest->empty()) return std::nullopt;
  return LinkCosts{*task, values[0], values[1], values[2], values[3], values[4], values[5]};
}

std::optional<LinkEnded> parse_ended(std::string_view body) {
  const auto rest = fields_of(body, LinkKind::kEnded);
  const auto task = rest ? parse_number<int>(*rest) : std::nullopt;
  if (!task) return std::nullopt;
  return LinkEnded{*task};
}

}  // namespace link_detail
}  // namespace hyrun
