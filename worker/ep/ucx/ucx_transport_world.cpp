// The World-based constructors of UcxTransport: the only EP code that needs hyrun::World
// (kept apart so that programs and tests using UcxBootstrap do not link World).
#include "hyrun/ep/ucx_transport.hpp"

namespace hyrun::ep {

namespace {
UcxBootstrap bootstrap_of(World& world) {
  UcxBootstrap b;
  b.rank = world.rank();
  b.size = world.size();
  b.context = world.ucp_context();
  b.worker = world.ucp_worker();
  // Looked up at every attach_peer: after World::replace_peer it is the new endpoint.
  b.endpoint = [&world](int peer) { return world.endpoint(peer); };
  b.allgatherv = [&world](std::span<const std::byte> mine) { return world.allgatherv(mine); };
  // Marked by the World's endpoint error callback (WorldOptions::peer_error_handling).
  b.peer_failed = [&world](int peer) { return world.peer_failed(peer); };
  return b;
}
}  // namespace

UcxTransport::UcxTransport(World& world, std::size_t region_bytes, std::chrono::milliseconds timeout, PeerAttach attach)
    : UcxTransport(bootstrap_of(world), nullptr, region_bytes, timeout, attach) {}

UcxTransport::UcxTransport(World& world, void* region, std::size_t region_bytes, std::chrono::milliseconds timeout,
                           PeerAttach attach)
    : UcxTransport(bootstrap_of(world), region, region_bytes, timeout, attach) {
  if (region == nullptr) throw UsageError("UCX EP transport: region must be non-null");
}

}  // namespace hyrun::ep
