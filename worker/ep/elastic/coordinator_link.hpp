#pragma once
// The messages between the elastic benchmark's coordinator (rank 0) and the other ranks:
// small JSON documents over the World's point-to-point messages. One tag per direction keeps
// each direction in order.
#include <nlohmann/json.hpp>

#include "hyrun/worker.hpp"

namespace hyrun::ep::elastic {

inline constexpr uint32_t kToRank = 0x45500001;         // coordinator -> rank: phase, go, resume, done
inline constexpr uint32_t kToCoordinator = 0x45500002;  // rank -> coordinator: register, ready, failed, result

void send_json(World& world, int peer, uint32_t tag, const nlohmann::json& message);
/// Receives one message of `tag` from `peer`; throws Error when it is not JSON or has no "type".
nlohmann::json recv_json(World& world, int peer, uint32_t tag);
/// recv_json that expects `type`; throws Error naming what came instead.
nlohmann::json expect(World& world, int peer, uint32_t tag, const std::string& type);

}  // namespace hyrun::ep::elastic
