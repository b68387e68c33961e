#pragma once
// The coordinator's messages (coordinator_messages.hpp) over the World's point-to-point
// messages: one JSON object per message, {"type": M::kType, fields...}, sent with M::kTag.
// Receiving checks the JSON, the type and every field; any fault is an Error naming the
// receiver, the sender and what was wrong.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "coordinator_messages.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/worker.hpp"

namespace hyrun::ep::elastic {

/// A received message: its type and its JSON (type included).
struct Envelope {
  std::string type;
  nlohmann::json body;
};

/// Parses one message's text; throws Error when it is not a JSON object with a string "type".
Envelope parse_envelope(std::string_view text);

/// The text of message `m`.
template <class M>
std::string encode(const M& m) {
  nlohmann::json j = m;
  j["type"] = M::kType;
  return j.dump();
}

/// `envelope` as an M; throws Error when its type is another or a field is malformed.
template <class M>
M decode(const Envelope& envelope) {
  if (envelope.type != M::kType) {
    std::string text = envelope.body.dump();
    if (text.size() > 120) text = text.substr(0, 117) + "...";
    throw Error(fmt::format("expected a '{}' message, got '{}': {}", M::kType, envelope.type, text));
  }
  return envelope.body.template get<M>();
}

template <class M>
M decode(std::string_view text) {
  return decode<M>(parse_envelope(text));
}

template <class M>
void send(World& world, int peer, const M& m) {
  const std::string text = encode(m);
  world.send(peer, std::as_bytes(std::span(text)), M::kTag);
}

/// Receives one message of `tag` from `peer` (World::recv: its timeout, TimeoutError).
Envelope receive(World& world, int peer, uint32_t tag);

/// Rethrows a decoding error with who received it from whom.
[[noreturn]] void rethrow_from(const World& world, int peer, const Error& e);

/// The next message from `peer` in M's direction, which must be an M.
template <class M>
M expect(World& world, int peer) {
  const Envelope envelope = receive(world, peer, M::kTag);
  try {
    return decode<M>(envelope);
  } catch (const Error& e) {
    rethrow_from(world, peer, e);
  }
}

/// The next message from `peer`, which must be one of Ms (all of one direction).
template <class First, class... Rest>
std::variant<First, Rest...> expect_one_of(World& world, int peer) {
  static_assert(((Rest::kTag == First::kTag) && ...), "one direction");
  const Envelope envelope = receive(world, peer, First::kTag);
  try {
    std::optional<std::variant<First, Rest...>> out;
    auto try_one = [&]<class M>(std::type_identity<M>) {
      if (!out && envelope.type == M::kType) out.emplace(std::in_place_type<M>, decode<M>(envelope));
    };
    (try_one(std::type_identity<First>{}), ..., try_one(std::type_identity<Rest>{}));
    if (!out) {
      const std::string expected = (fmt::format("'{}'", First::kType) + ... + fmt::format(" or '{}'", Rest::kType));
      throw Error(fmt::format("expected {}, got a '{}' message", expected, envelope.type));
    }
    return std::move(*out);
  } catch (const Error& e) {
    rethrow_from(world, peer, e);
  }
}

}  // namespace hyrun::ep::elastic
