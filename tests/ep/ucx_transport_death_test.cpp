// A writer that dies right after its write over tcp must not take its target down with it
// (cloudai.unplanned-kill, docs/reliability.md). UCX 1.13 emulates puts over tcp with
// active messages, and the target answers each put with a completion message; when that
// answer cannot be sent (the writer's socket was reset), UCX aborts the target
// (ucp_request.inl:346 "Fatal: unexpected error: Endpoint timeout", from ucp_put_handler)
// whatever the endpoint's error handling mode.
//
// The order is forced, not hoped for: two real processes (a SIGKILL is the only faithful
// death), the order of their steps set by pipes. The target writes to the victim first
// and the victim never takes that write in, so that its death resets the connection
// (a socket closed with unread data sends RST). The victim then writes to the target and
// is killed before the target progresses at all; only then does the target take the
// victim's write in. The target must survive, hold the write, and see the victim failed.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "hyrun/ep/ucx_transport.hpp"

using namespace hyrun::ep;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBytes = 4096, kOffset = 64;
constexpr uint64_t kVictimValue = 0x5555aaaa5555aaaaull, kTargetValue = 0x1234;

void write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) throw std::runtime_error("pipe write failed");
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}
void read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) throw std::runtime_error("pipe read failed");
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}
void send_bytes(int fd, const std::vector<std::byte>& v) {
  const uint64_t n = v.size();
  write_all(fd, &n, 8);
  write_all(fd, v.data(), v.size());
}
std::vector<std::byte> recv_bytes(int fd) {
  uint64_t n = 0;
  read_all(fd, &n, 8);
  std::vector<std::byte> v(n);
  read_all(fd, v.data(), n);
  return v;
}
void send_step(int fd) { write_all(fd, "x", 1); }
void wait_step(int fd) {
  char c;
  read_all(fd, &c, 1);
}
// The same while progressing `worker`: the peer may still need this side's answers.
void wait_step_progressing(int fd, ucp_worker_h worker) {
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 0) == 0) ucp_worker_progress(worker);
  wait_step(fd);
}

// One rank of the pair, as World sets it up: tag, RMA and AM features, tcp only, an
// endpoint with peer error handling whose callback marks the peer failed.
class TcpRank {
 public:
  TcpRank() {
    ucp_config_t* cfg = nullptr;
    if (ucp_config_read(nullptr, nullptr, &cfg) != UCS_OK) throw std::runtime_error("ucp_config_read");
    ucp_config_modify(cfg, "TLS", "tcp");
    ucp_config_modify(cfg, "NET_DEVICES", "lo");
    ucp_params_t up{};
    up.field_mask = UCP_PARAM_FIELD_FEATURES;
    up.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AM;
    const ucs_status_t st = ucp_init(&up, cfg, &ctx_);
    ucp_config_release(cfg);
    if (st != UCS_OK) throw std::runtime_error("ucp_init");
    ucp_worker_params_t wp{};
    if (ucp_worker_create(ctx_, &wp, &worker_) != UCS_OK) throw std::runtime_error("ucp_worker_create");
  }
  // A test process ends with _exit: the endpoint, worker and context go with it.
  std::vector<std::byte> address() const {
    ucp_address_t* a = nullptr;
    std::size_t len = 0;
    ucp_worker_get_address(worker_, &a, &len);
    std::vector<std::byte> v(reinterpret_cast<std::byte*>(a), reinterpret_cast<std::byte*>(a) + len);
    ucp_worker_release_address(worker_, a);
    return v;
  }
  void connect(const std::vector<std::byte>& peer) {
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) { *static_cast<bool*>(arg) = true; };
    ep.err_handler.arg = &peer_failed_;
    if (ucp_ep_create(worker_, &ep, &ep_) != UCS_OK) throw std::runtime_error("ucp_ep_create");
  }
  UcxBootstrap bootstrap(int rank) {
    UcxBootstrap b;
    b.rank = rank;
    b.size = 2;
    b.context = ctx_;
    b.worker = worker_;
    b.endpoint = [this](int) { return ep_; };
    b.peer_failed = [this](int) { return peer_failed_; };
    return b;
  }
  ucp_worker_h worker() const { return worker_; }
  bool peer_failed() const { return peer_failed_; }

 private:
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  bool peer_failed_ = false;
};

struct Pipes {
  int to_victim[2], to_target[2];
};

// Connects, exchanges region descriptors, and writes once each way with a flush while the
// other side flushes too (so that both connections are up), over the pipes. Returns when
// both sides have stopped progressing.
void connect_pair(TcpRank& me, UcxTransport& tx, int in, int out) {
  send_bytes(out, me.address());
  me.connect(recv_bytes(in));
  send_bytes(out, tx.local_descriptor());
  tx.attach_peer(1 - tx.rank(), recv_bytes(in));
  const uint64_t hello = 1;
  tx.put(1 - tx.rank(), 0, &hello, 8);
  tx.flush();
  send_step(out);  // both flushed before either goes on
  wait_step_progressing(in, me.worker());
  send_step(out);  // neither progresses any more
  wait_step(in);
}

[[noreturn]] void victim_main(const Pipes& p) {
  try {
    TcpRank me;
    UcxTransport tx(me.bootstrap(1), nullptr, kBytes, 10000ms, PeerAttach::kDeferred);
    connect_pair(me, tx, p.to_victim[0], p.to_target[1]);
    wait_step(p.to_victim[0]);             // the target's write is now unread here; never progress again
    tx.put(0, kOffset, &kVictimValue, 8);  // sent at once on a connected tcp endpoint
    send_step(p.to_target[1]);
    wait_step(p.to_victim[0]);  // killed here
  } catch (const std::exception& e) {
    std::fprintf(stderr, "victim: %s\n", e.what());
  }
  _exit(3);
}

// The target's side; its exit code is the verdict: 0 survived with the write, 1 otherwise.
[[noreturn]] void target_main(const Pipes& p, pid_t victim) {
  int code = 1;
  try {
    TcpRank me;
    UcxTransport tx(me.bootstrap(0), nullptr, kBytes, 10000ms, PeerAttach::kDeferred);
    connect_pair(me, tx, p.to_target[0], p.to_victim[1]);
    tx.put(1, kOffset, &kTargetValue, 8);  // left unread in the victim's socket
    send_step(p.to_victim[1]);
    wait_step(p.to_target[0]);  // the victim's write is on its way here
    ::kill(victim, SIGKILL);
    ::waitpid(victim, nullptr, 0);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!me.peer_failed() && std::chrono::steady_clock::now() < until) ucp_worker_progress(me.worker());
    uint64_t seen = 0;
    std::memcpy(&seen, tx.region().data() + kOffset, 8);
    if (seen != kVictimValue) std::fprintf(stderr, "target: the victim's write did not land (%#lx)\n", seen);
    if (!me.peer_failed()) std::fprintf(stderr, "target: the victim's death was not reported\n");
    code = seen == kVictimValue && me.peer_failed() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "target: %s\n", e.what());
  }
  _exit(code);
}

}  // namespace

TEST(EpUcxTransportDeath, AWriterKilledBeforeItsWriteIsTakenInDoesNotAbortTheTarget) {
  Pipes p{};
  ASSERT_EQ(::pipe(p.to_victim), 0);
  ASSERT_EQ(::pipe(p.to_target), 0);
  const pid_t target = ::fork();
  ASSERT_GE(target, 0);
  if (target == 0) {  // UCX is set up only after the forks (it does not survive one)
    const pid_t victim = ::fork();
    if (victim < 0) _exit(2);
    if (victim == 0) victim_main(p);
    target_main(p, victim);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(target, &status, 0), target);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the target was killed by signal " << WTERMSIG(status)
                                    << " (SIGABRT: UCX's fatal error on the dead writer's put)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the target's message above";
}
