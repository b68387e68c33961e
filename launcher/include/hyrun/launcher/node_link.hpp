#pragma once
// The link among the hyrun processes of one job, so that a node whose hyrun dies or drops
// off the network ends the job within about a second without help from srun options.
// A star: the root hyrun (PMIx rank 0) listens on a TCP port that it puts in its record;
// every other hyrun connects after the fence and proves that it holds the job token
// (HMAC-SHA256 of its task number). Both ends send a heartbeat every 200 ms. A link that
// closes (the peer died) or stays silent for 1 s (the peer's node is off the network)
// without the peer having said "bye" is a loss. A loss ends the job, unless the job goes on
// without that node (its ranks handle deaths): the root then tells the other nodes ("lost").
// Wire format: docs/architecture.md.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hyrun/launcher/poll_participant.hpp"
#include "hyrun/launcher/signal_events.hpp"
#include "hyrun/launcher/unique_fd.hpp"

namespace hyrun {

class NodeLink : public PollParticipant {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kHeartbeat = std::chrono::milliseconds(200);
  static constexpr auto kSilenceLimit = std::chrono::milliseconds(1000);
  /// How long after the fence the root waits for a node's hyrun to connect.
  static constexpr auto kConnectLimit = std::chrono::seconds(10);

  struct Loss {
    int task = -1;         ///< the lost node's task (PMIx rank)
    std::string host;      ///< its host name
    std::string why;       ///< "connection closed", ...; for a relayed loss, as the root saw it
    bool relayed = false;  ///< the root reported it (the node was not linked to this one)
  };
  /// Called on a loss; returns true when the job goes on without the node (the loss is
  /// absorbed: the root relays it to the other nodes), false when it ends the job. After a
  /// loss that ends the job, no more are reported.
  using LossHandler = std::function<bool(const Loss& loss)>;

  /// The root's listening socket on every address, any free port. Throws SystemError.
  static NodeLink listen();
  int port() const { return port_; }

  /// Root: awaits a connection from every task but `self` of `hosts` (host name per task).
  void expect(const std::vector<std::string>& hosts, int self, std::string token);
  /// Other nodes: connects (without blocking) to the root at `address`:`port`, as `self`.
  static NodeLink connect(const std::string& address, int port, int self, std::string root_host, std::string token);

  void on_loss(LossHandler handler) { on_loss_ = std::move(handler); }
  /// True once a loss that ends the job was reported.
  bool lost() const { return lost_; }

  /// Says "bye" on every link (this hyrun ends by itself: done, or ending the job by PMIx
  /// abort), so that its closing is not a loss. Best effort, never blocks.
  void say_bye();
  /// Root, after its own ranks ended well: keeps the links until every other node said bye
  /// or was lost; returns early on a stop signal (left queued). Returns false on a loss
  /// that ends the job.
  bool await_byes(SignalEvents& signals);

  /// Handles what is ready now and sends what is due, without waiting: for work outside the
  /// poll loop that takes a while (starting many ranks), so that heartbeats keep flowing.
  void service();

  void add_poll_fds(std::vector<pollfd>& fds) override;
  bool on_poll(const pollfd& p) override;
  Clock::time_point wake_by() const override;
  void on_tick() override;

  NodeLink(NodeLink&&) = default;
  NodeLink& operator=(NodeLink&&) = default;
  ~NodeLink() override = default;

 private:
  struct Peer {
    UniqueFd fd;
    int task = -1;  // -1: accepted, hello not read yet
    std::string host;
    bool connecting = false;  // our non-blocking connect is in progress
    bool said_bye = false;
    bool gone = false;  // lost, or closed after its bye
    Clock::time_point heard{};
    std::string in;
    std::string out;
  };
  NodeLink() = default;

  void accept_all();
  void on_readable(Peer& peer);
  void on_line(Peer& peer, const std::string& line);
  void send(Peer& peer, const std::string& line);
  void flush(Peer& peer);
  void lose(Peer& peer, const std::string& why);
  /// Hands `loss` to the handler; returns true when it was absorbed.
  bool report(const Loss& loss);
  void close_quietly(Peer& peer);

  bool root_ = false;
  int self_ = 0;
  int port_ = 0;
  std::string token_;
  UniqueFd listener_;
  std::vector<Peer> peers_;         // root: one per expected task (fd empty until hello); others: the root
  std::vector<Peer> unidentified_;  // root: accepted, hello not read yet
  Clock::time_point next_heartbeat_{};
  Clock::time_point connect_deadline_{};
  LossHandler on_loss_;
  bool lost_ = false;
};

}  // namespace hyrun
