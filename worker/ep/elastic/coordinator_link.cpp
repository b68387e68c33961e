#include "coordinator_link.hpp"

namespace hyrun::ep::elastic {

Envelope parse_envelope(std::string_view text) {
  nlohmann::json body = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (body.is_discarded()) throw Error("a coordinator message that is not JSON");
  if (!body.is_object())
    throw Error(fmt::format("a coordinator message that is not a JSON object: {}", body.dump().substr(0, 60)));
  const auto type = body.find("type");
  if (type == body.end() || !type->is_string())
    throw Error(fmt::format("a coordinator message without a string 'type': {}", body.dump().substr(0, 60)));
  return {type->get<std::string>(), std::move(body)};
}

Envelope receive(World& world, int peer, uint32_t tag) {
  const auto bytes = world.recv(peer, tag);
  try {
    return parse_envelope(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const Error& e) {
    rethrow_from(world, peer, e);
  }
}

void rethrow_from(const World& world, int peer, const Error& e) {
  throw Error(fmt::format("rank {}: from rank {}: {}", world.rank(), peer, e.what()));
}

}  // namespace hyrun::ep::elastic
