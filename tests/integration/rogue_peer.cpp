// rogue-peer: an attacker on the node or the network. It knows rank 0's UCX worker address
// (anyone can build one from the listening ports) but not the job token, connects with
// real UCX and sends what the worker library must refuse without harm:
//   oversized-join  a 64 MiB message with a join tag (must not be read into memory)
//   impersonate     joins, collective contributions and point-to-point messages that
//                   claim to come from another rank, in the job's own format but unsealed
//   garbage         random bytes under join tags and random tags
// It waits (bounded) for its sends and prints how each ended; it never hangs.
#include <ucp/api/ucp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/common/hex.hpp"
#include "hyrun/ucx/context.hpp"
#include "hyrun/ucx/endpoint.hpp"
#include "hyrun/ucx/request.hpp"
#include "hyrun/ucx/worker.hpp"
#include "message_tag.hpp"

namespace {

using hyrun::tag::Kind;
using hyrun::tag::make;

struct Message {
  ucp_tag_t tag;
  std::vector<std::byte> bytes;
};

std::vector<Message> attack_messages(const std::string& attack, int claimed_rank, std::mt19937_64& gen) {
  std::vector<Message> out;
  const auto random_bytes = [&](std::size_t n) {
    std::vector<std::byte> b(n);
    for (auto& x : b) x = static_cast<std::byte>(gen());
    return b;
  };
  if (attack == "oversized-join") {
    out.push_back({make(Kind::kJoin, claimed_rank, 0), std::vector<std::byte>(64u << 20, std::byte{0x4a})});
  } else if (attack == "impersonate") {
    // A join in the old plain format (rank, token, address) with a made-up token.
    out.push_back({make(Kind::kJoin, claimed_rank, 0), random_bytes(300)});
    for (uint64_t seq = 1; seq <= 30; ++seq)  // collective contributions (4 KiB, as test-rank --exchange-bytes 4096)
      out.push_back({make(Kind::kCollective, claimed_rank, seq), std::vector<std::byte>(4096, std::byte{0xee})});
    for (int i = 0; i < 3; ++i)  // point-to-point on test-rank's ring tag
      out.push_back({make(Kind::kPointToPoint, claimed_rank, 1), random_bytes(22)});
  } else if (attack == "garbage") {
    for (int i = 0; i < 5; ++i)
      out.push_back({make(Kind::kJoin, static_cast<int>(gen() % 8), gen()), random_bytes(gen() % 2000)});
    for (int i = 0; i < 20; ++i) out.push_back({gen(), random_bytes(gen() % 70000)});
  } else {
    throw hyrun::Error("--attack: '" + attack + "' is not one of oversized-join, impersonate, garbage");
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rogue-peer: sends unauthenticated messages to a hyrun job's rank 0"};
  std::string address_hex, attack;
  int claimed_rank = 1;
  app.add_option("--address", address_hex, "rank 0's UCX worker address, hex")->required();
  app.add_option("--attack", attack, "oversized-join | impersonate | garbage")->required();
  app.add_option("--claim-rank", claimed_rank, "the rank the messages claim to come from");
  CLI11_PARSE(app, argc, argv);
  try {
    namespace ucx = hyrun::ucx;
    const auto address = hyrun::from_hex(address_hex, "--address");
    auto context = ucx::make_context(0);
    auto worker = ucx::make_worker(context.get());
    // Peer error handling: rank 0 may close the connection on us; we only report it.
    ucx::Endpoint ep(
        worker.get(), address, true, [](void*, ucp_ep_h, ucs_status_t) {}, nullptr);
    std::mt19937_64 gen(std::random_device{}());
    const auto messages = attack_messages(attack, claimed_rank, gen);
    std::vector<ucx::Request> requests;
    for (const auto& m : messages) {
      ucp_request_param_t param{};
      requests.emplace_back(ucp_tag_send_nbx(ep.get(), m.bytes.data(), m.bytes.size(), m.tag, &param));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    int done = 0, failed = 0, pending = 0;
    for (auto& r : requests) {
      const ucs_status_t status = r.wait_or_cancel(worker.get(), deadline);
      (status == UCS_OK ? done : status == UCS_ERR_TIMED_OUT ? pending : failed)++;
    }
    std::printf("rogue-peer %s: %zu messages sent as rank %d: %d completed, %d failed, %d never taken\n",
                attack.c_str(), messages.size(), claimed_rank, done, failed, pending);
    ep.close(std::chrono::seconds(1), true);
    return 0;
  } catch (const hyrun::Error& e) {
    std::fprintf(stderr, "rogue-peer: %s\n", e.what());
    return 1;
  }
}
