#include "coordinator_link.hpp"

#include <fmt/format.h>

namespace hyrun::ep::elastic {

void send_json(World& world, int peer, uint32_t tag, const nlohmann::json& message) {
  const std::string text = message.dump();
  world.send(peer, std::as_bytes(std::span(text)), tag);
}

nlohmann::json recv_json(World& world, int peer, uint32_t tag) {
  const auto bytes = world.recv(peer, tag);
  nlohmann::json message = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                                 nullptr, false);
  if (message.is_discarded() || !message.contains("type"))
    throw Error(fmt::format("rank {}: a malformed coordinator message from rank {}", world.rank(), peer));
  return message;
}

nlohmann::json expect(World& world, int peer, uint32_t tag, const std::string& type) {
  auto message = recv_json(world, peer, tag);
  if (message["type"] != type)
    throw Error(fmt::format("rank {}: expected '{}' from rank {}, got {}", world.rank(), type, peer, message.dump()));
  return message;
}

}  // namespace hyrun::ep::elastic
