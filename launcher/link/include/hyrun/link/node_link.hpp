#pragma once
// The link among the hyrun processes of one job, so that a node whose hyrun dies or drops
// off the network ends the job without help from srun options.
// The hyrun processes form a tree (link_tree.hpp). The root hyrun (PMIx rank 0) listens on a
// TCP port that it puts in its record, every other hyrun on one in its node record; after the
// fence each connects to its parent and proves that it holds the job token (HMAC-SHA256 of its
// task number, the task it connects to and a fresh nonce); every later line, either way, is
// sealed with the session's key (link_seal.hpp). A node whose parent is not the root connects
// to the root only on need (reach_root, root_link): the PMIx relay's lines, which travel only
// to and from the root, or its parent lost. Heartbeats go from every node to its parent and,
// on its connection to the root, to the root (which may watch it from any moment: its parent
// lost or gone), and from the root or a parent to the nodes it watches, each from a thread of
// its own (LinkWriter), so that a busy main loop never silences them. A connection that closes
// (the peer died) is a loss at once; a parent or child silent for the node timeout
// (--node-timeout: the peer's node is off the network, or its hyrun is stopped) without
// having said "bye" is a loss then (before it has linked, the launch's limit holds:
// allow_launch()). A node that loses a parent or child does not act on it:
// it tells the root, up the tree (to its parent, which passes it on; to the root itself once
// its parent is gone), and the root decides as for a loss of its own and names the node that
// is gone, not the one that saw it (the node watches the root meanwhile, if it lost its
// parent, and tells it again what it had sent up). A loss ends the job, unless the job goes
// on without that node (its ranks handle deaths): the root then tells the other nodes
// ("lost": those linked with it, each of which passes the word to its children, and a node
// that links later when it does), and the lost node's children are watched by the root from
// then on: each connects to the root once it sees its parent lost, and the root waits for that
// as for its own children, but not for one that had ended before (said bye to it): a parent
// tells its own parent of each child's bye ("ended"), and passes those words up to the root
// once it loses that child. A parent's bye says that its subtree ended, or that the whole job
// ends (its abort, its launcher's signal): its children link with the root only on need, and
// the root watches them then. A node that ends the job for the
// root's loss (or the root's word) tells its children, so the loss of the root reaches every node along the tree. The
// job's end goes up the tree too: a node whose ranks ended waits for its children's bye (await_byes) before its own, so
// a bye says that the node's whole subtree has ended, and what the subtree said before it (a loss, --timings' costs) is
// already on its way up the same connection, ahead of it. The root may hold a connection to every node, so the link's
// sockets sit in an epoll set of its own and the main loop polls one descriptor for them all: a wake of the root costs
// what is ready, not the number of nodes. Its limits are judged the same way: the peers are looked at when the earliest
// of their deadlines comes (or something that may be due sooner happens), not at every wake, and only the sockets that
// have bytes queued are armed for writing. Direct modex between two nodes that are not the root goes straight from the
// node that asks to the node that holds the rank, not through the root: ask() opens a connection of its own to that
// node on first use (every node listens), and the holder's reply() goes back on it (the root asks so a holder not
// linked with it, which answers on its own link to the root). Such a connection carries direct modex only; it is not
// watched (the tree judges liveness), and its closing is no loss: the asker's open requests to that node fail
// (on_unreachable). Its lines are the kinds of link_message.hpp: the link takes alive, bye, lost and ended itself;
// another protocol carried on the root's connections (the PMIx relay: fences and direct modex) registers a handler for
// each kind of its own (on()). A line of a kind that no one takes, or of no kind of the protocol's version, ends the
// link. Wire format: docs/architecture.md.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hyrun/common/warning_limiter.hpp"
#include "hyrun/link/link_message.hpp"
#include "hyrun/link/link_seal.hpp"
#include "hyrun/link/link_tree.hpp"
#include "hyrun/link/link_writer.hpp"
#include "hyrun/process/poll_participant.hpp"
#include "hyrun/process/signal_events.hpp"
#include "hyrun/process/unique_fd.hpp"

namespace hyrun {

class NodeLink : public PollParticipant {
 public:
  using Clock = std::chrono::steady_clock;
  /// How long after the fence the root waits at least for a node's hyrun to connect.
  static constexpr auto kConnectLimit = std::chrono::seconds(10);
  /// At most this many accepted connections wait for their hello at once beyond the job's
  /// other nodes (anyone can connect; every node of a large job may connect at once).
  static constexpr std::size_t kMaxUnidentified = 64;
  /// How long the root stops accepting when accept fails for want of descriptors or memory.
  static constexpr std::chrono::milliseconds kAcceptPause{100};
  /// The heartbeat period for a silence limit: five beats fit in it, at most one a second.
  static std::chrono::milliseconds heartbeat_for(std::chrono::milliseconds silence_limit);

  struct Loss {
    int task = -1;         ///< the lost node's task (PMIx rank)
    std::string host;      ///< its host name
    std::string why;       ///< "connection closed", ...; for a relayed loss, as the reporter saw it
    bool relayed = false;  ///< another hyrun reported it (the root, or this node's parent)
    int reporter = 0;      ///< with `relayed`: who saw it (0: the root's word, whoever passed it on)
  };
  /// Called on a loss; returns true when the job goes on without the node (the loss is
  /// absorbed: the root relays it to the other nodes), false when it ends the job. After a
  /// loss that ends the job, no more are reported.
  using LossHandler = std::function<bool(const Loss& loss)>;

  /// A listening socket on every address, any free port (the root's, or a parent's in the
  /// tree); a peer silent for `silence_limit` is lost. Throws SystemError.
  /// `max_queued`: the most bytes queued for one peer (LinkWriter); a peer past it reads
  /// nothing and is lost, named so, rather than a message to it dropped. Tests set less.
  static NodeLink listen(std::chrono::milliseconds silence_limit, std::size_t max_queued = LinkWriter::kMaxQueuedBytes);
  int port() const { return port_; }

  /// Awaits a connection from this task's children in `tree` (a link that listens), each lost
  /// if it has not connected within the connect limit; the root takes one from any other task
  /// of `hosts` (host name per task) too, on need, and waits for none of those.
  /// kMaxUnidentified + the tasks may wait for their hello at once. Heartbeats and the
  /// silence limit hold between parent and child in `tree` only (none: the star over `hosts`).
  void expect(const std::vector<std::string>& hosts, int self, std::string token,
              std::optional<LinkTree> tree = std::nullopt);
  /// Other nodes: connects (without blocking) to the root at `address`:`port`, as `self`, in
  /// the star.
  static NodeLink connect(const std::string& address, int port, int self, std::string root_host, std::string token,
                          std::chrono::milliseconds silence_limit,
                          std::size_t max_queued = LinkWriter::kMaxQueuedBytes);
  /// Other nodes: connects (without blocking) to `task` (the root, or this node's parent in
  /// the tree) at `address`:`port`; after expect() where this link listens.
  void dial(int task, const std::string& host, const std::string& address, int port);
  /// Other nodes whose tree parent is not the root: where the root listens, dialled on need
  /// (root_link()): for the relay's lines to the root, and once the parent is lost.
  void reach_root(std::string host, std::string address, int port);
  /// A link that does not listen (a node without children), for dial().
  static NodeLink unlistened(int self, std::string token, LinkTree tree, std::chrono::milliseconds silence_limit,
                             std::size_t max_queued = LinkWriter::kMaxQueuedBytes);

  void on_loss(LossHandler handler) { on_loss_ = std::move(handler); }

  /// How long a tree neighbour may take to come, while the launch still runs (hyrun's
  /// --bootstrap-timeout): an expected child to connect, a dialled parent to say its first
  /// line. Each node reads every node's record after the fence before it takes its children
  /// (launch_sequence.cpp), so one may be that much behind another. Never less than the
  /// silence limit; set it before expect() and dial().
  void allow_launch(std::chrono::milliseconds limit) { launch_limit_ = limit; }

  /// Where a task's hyrun listens (an address this node reaches it at, and the port).
  struct Endpoint {
    std::string address;
    int port = 0;
  };
  /// Finds where `task` listens (nullopt: it does not), for ask().
  using Locate = std::function<std::optional<Endpoint>(int task)>;
  void locate_with(Locate locate) { locate_ = std::move(locate); }
  /// Called when what this node asked on the connection that ask() opened to `task` gets no
  /// answer: that connection closed or could not connect. At the root, whose answers come on
  /// `task`'s own link to it: the connect failed, or `task` did not link with the root within
  /// the connect limit of its end (once linked, its bye or loss settles what it was asked).
  void on_unreachable(std::function<void(int task)> handler) { on_unreachable_ = std::move(handler); }
  /// At the root: called when `task` says bye on its link, its last line (it answers nothing
  /// more).
  void on_bye(std::function<void(int task)> handler) { on_bye_ = std::move(handler); }
  /// Sends `body` (a direct modex request) on this node's own connection to `task`, a node
  /// that is not the root, connecting on first use (the root asks so a node not linked
  /// with it).
  /// False when there is none and none can be had (no locate_with, no endpoint, the job lost,
  /// `task` lost and the job went on without it).
  bool ask(int task, const std::string& body);
  /// Sends `body` (an answer) back on the connection that `task` opened with ask(); false
  /// when it is gone.
  bool reply(int task, const std::string& body);
  /// Takes the lines of `kind` (a kind the link does not take itself: not alive, bye, lost or
  /// ended; Error otherwise): called with the sending task and the line's body; returns false
  /// for a body that is not exactly its kind's (then the line ends the link).
  using Handler = std::function<bool(int task, std::string_view body)>;
  void on(LinkKind kind, Handler handler);
  /// Sends `body` sealed to `task` (the root, from another node; any node, from the root),
  /// in order with the link's own lines; false (nothing sent) when that peer is gone or has
  /// not linked yet. Another node's line to the root dials it on need (root_link()); a dial
  /// that fails at once is the root lost, said at the next tick.
  bool send_to(int task, const std::string& body);
  /// Sends `body` sealed up the tree: to this node's parent, or to the root once the parent is
  /// gone (lost, or left); nothing at the root.
  void send_up(const std::string& body);
  /// Sends `body` sealed to every peer still linked that has not said bye (from the root:
  /// every other node; from another node: the root, not its tree neighbours).
  void broadcast(std::string body);
  /// True once a loss that ends the job was reported.
  bool lost() const { return lost_; }
  /// Bytes written to and read from the peers' sockets so far, hellos and seals included
  /// (--timings).
  std::uint64_t bytes_sent() const { return writer_ ? writer_->bytes_sent() : 0; }
  std::uint64_t bytes_received() const { return received_; }

  /// Says "bye" on every link (this hyrun ends by itself: done, or ending the job by PMIx
  /// abort), so that its closing is not a loss. Best effort, never blocks.
  void say_bye();
  /// After this node's own ranks ended well: keeps the links until every node it waits for
  /// said bye or was lost (the root: its children, the nodes it adopted, and any node linked
  /// with it; another node: its children in the tree, whose byes say that their subtrees ended); returns early on a
  /// stop signal (left queued). Returns false on a loss that ends the job.
  bool await_byes(SignalEvents& signals);

  /// Handles what is ready now, without waiting: for work outside the poll loop that takes
  /// a while (starting many ranks), so that a peer's loss is seen there too.
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
    int slot = 0;   // identified: its index in peers_ (its key in the epoll set and the writer)
    std::string host;
    bool connecting = false;  // our non-blocking connect is in progress
    bool said_bye = false;
    bool gone = false;        // lost, or closed after its bye
    bool overflowed = false;  // its queue passed the writer's bound: lost at the next tick
    bool watched = true;      // parent or child in the tree: heartbeats, and its silence is a loss
    bool out_armed = false;   // its socket's writability is in the epoll set
    bool launching = false;   // dialled, nothing read from it yet: it may still be in its launch
    bool reading = false;     // on_readable() is taking its lines (take_what_waits() leaves it be)
    // Not connected yet and watched (a child; at the root, a lost node's child): lost when it
    // has not connected by then. adopted_from: at the root, the lost parent it was taken from.
    Clock::time_point connect_by{};
    int adopted_from = -1;
    enum class Direct { kNo, kOut, kIn } direct = Direct::kNo;  // ask()'s connection, ours or the peer's
    Clock::time_point heard{};  // identified: the last bytes read; unidentified: accepted
    std::string in;
    std::optional<LinkSeal> seal;  // identified: opens the lines it sends
  };
  NodeLink(std::chrono::milliseconds silence_limit, std::size_t max_queued);

  void accept_all();
  /// At kMaxUnidentified: reads the hellos that came, then closes the oldest still waiting.
  void make_room();
  void on_readable(Peer& peer);
  void on_line(Peer& peer, const std::string& line);
  /// The kinds the link takes itself (alive, bye, lost, ended; costs on their way up); false: not
  /// one of those, or not exactly its kind.
  bool take_own(Peer& peer, LinkKind kind, const std::string& body);
  void on_direct_line(Peer& peer, LinkKind kind, const std::string& body);
  void send(Peer& peer, const std::string& line);
  /// say_bye's end for one peer whose socket polled `revents`.
  void finish_bye(Peer& peer, short revents);
  /// How long an accepted connection may take to prove it is a hyrun of this job, from accept:
  /// as long as a node may be silent (--node-timeout). A busy node's hello may come seconds
  /// late (512 x 4 simulated nodes on 2 cores: half the nodes that dialled while the root's loop
  /// ran were closed at the 5 s this was); outsiders are bounded by the count of such
  /// connections (max_unidentified_), which an outsider who reconnects would meet anyway.
  std::chrono::milliseconds hello_limit() const { return silence_limit_; }
  /// How long `peer` may be silent: the launch's limit while a neighbour we dialled has said
  /// nothing yet (allow_launch), else the silence limit.
  std::chrono::milliseconds silence_limit_of(const Peer& peer) const;
  /// How long an expected node may take to connect, from expect().
  std::chrono::milliseconds connect_limit() const;
  /// Why `peer`, past silence_limit_of(), is lost.
  std::string silence_of(const Peer& peer) const;
  /// Handles what `peer`'s socket holds now (lines, a connect's end), before a limit judges it.
  void take_what_waits(Peer& peer);
  void lose(Peer& peer, const std::string& why);
  /// Hands `loss` to the handler once a task; returns true when it was absorbed. Another node
  /// passes the word to its children (a loss that ends the job, or one it goes on without,
  /// which it also keeps for a child that links later).
  bool report(const Loss& loss);
  /// A lost line: from the root or this node's parent (the root's word, passed down the
  /// tree: a node the job goes on without, or a loss that ends it), or from below (a node of `peer`'s subtree lost a
  /// tree neighbour: the root judges it, another node passes it up).
  bool take_loss(Peer& peer, const LinkLoss& lost);
  /// A costs line from a child (its own, or one of its subtree's), passed up; false when the
  /// costs are of no node of that child's subtree.
  bool pass_costs_up(const Peer& peer, const std::string& body);
  /// Another node: its child `child` said bye; its parent (or the root, once the parent is lost
  /// and this node linked with it) keeps the word for the loss of this node (`ended`).
  void tell_ended(int child);
  /// An ended line from `peer`: kept (at another node: for a child of `peer`; at the root, which
  /// then does not wait for that node once its parent is lost), or passed up (at another node:
  /// a lost node's child); false when `task` is not of `peer`'s subtree below it.
  bool take_ended(const Peer& peer, int task);
  /// Another node: its child `task` is lost; the words that its children had ended go up to the
  /// root, which adopts the others.
  void pass_up_ended_children_of(int task);
  /// Sends a loss report up the tree, and keeps it to tell the root again if the parent goes.
  void report_up(const std::string& body);
  /// ask()'s connection `peer` ended: what was asked there gets no answer (on_unreachable), now
  /// or, at the root, once it is clear that none can come.
  void unreached_on_own(const Peer& peer);
  /// True for a peer that await_byes() waits for.
  bool awaited(const Peer& peer) const;
  /// At the root: `task` left (bye: its children linked with the root) or was lost and the job
  /// goes on (its children, linked or not: each has the connect limit), and the root watches
  /// them. At `task`'s child: its parent was lost, and this node links with the root and
  /// watches it (also while it awaits the root's word on that loss).
  void adopt_children_of(int task);
  /// The root's, the parent's or a child's connection to `task` (not ask()'s).
  Peer* find_peer(int task);
  /// Another node: its connection to the root, dialled now if it has none yet and knows
  /// where the root listens (reach_root); null when it has none and can have none.
  Peer* root_link();
  Peer* find_direct(int task, Peer::Direct which);
  /// Accepts a hello from a task that is none of this node's tree peers: ask()'s connection.
  /// An accepted connection's first line: a hello of the job's, for a tree place or ask().
  void take_hello(Peer& peer, const std::string& line);
  /// A place for ask()'s connection from `task`; null when it has one already.
  Peer* add_direct_in(int task);
  /// Opens a connection to `task` at `address`:`port`; returns its index in peers_.
  std::size_t open_connection(int task, const std::string& host, const std::string& address, int port,
                              LinkPurpose purpose);

  void close_quietly(Peer& peer);
  // The epoll set (key: a task, an unidentified peer's descriptor, or the listener).
  void watch(int fd, std::uint64_t key, std::uint32_t events);
  void rewatch(int fd, std::uint64_t key, std::uint32_t events);
  void unwatch(const Peer& peer);
  /// Arms or disarms each peer's writability to what it waits for (connect, queued bytes).
  void settle_writability();
  /// Handles one socket's readiness (the poll's bits) for `peer`.
  void on_ready(Peer& peer, short revents);
  /// Every peer's limits at `now` (silence, connect, hello, a queue past its bound).
  void judge_peers(Clock::time_point now);
  /// The earliest time at which judge_peers() may find something due.
  Clock::time_point next_deadline() const;
  /// Something may be due at `when`, before the deadline judge_peers() last saw.
  void judge_by(Clock::time_point when) { next_judgement_ = std::min(next_judgement_, when); }

  bool root_ = false;
  int self_ = 0;
  LinkTree tree_;
  std::set<int> absorbed_;  // tasks whose loss the job went on without
  // Nodes whose bye to their parent this node heard of (ended): another node's grandchildren;
  // at the root, any node below its children.
  std::set<int> ended_;
  std::vector<std::string> reports_;  // the losses this node sent up (report_up)
  std::vector<std::string> told_;     // the lost lines of the losses absorbed, for a node that links later
  int port_ = 0;
  std::string token_;
  UniqueFd listener_;
  UniqueFd poller_;                // epoll: every socket of the link
  bool listener_watched_ = false;  // in the epoll set (not while accepting is paused)
  // Root: one per task, at its index (fd empty until hello), then ask()'s connections (its
  // own and the nodes'); others: the root, the parent, children, and ask()'s connections. A deque: a handler may add
  // one while another is in use. The epoll set's key of an identified peer is its index here.
  std::deque<Peer> peers_;
  std::map<std::pair<int, Peer::Direct>, std::size_t> direct_;  // ask()'s connections: their index
  std::vector<Peer> unidentified_;                              // root: accepted, hello not read yet
  std::size_t max_unidentified_ = kMaxUnidentified;             // root: see expect()
  std::chrono::milliseconds silence_limit_;
  std::chrono::milliseconds launch_limit_{0};  // allow_launch(); at least silence_limit_ where used
  std::uint64_t received_ = 0;
  // When on_tick() next looks at every peer. Deadlines only move later (a peer heard from,
  // one that linked) or start at least a silence limit from now, so this stays early enough;
  // what can be due sooner (a queue past its bound, a paused accept) brings it forward.
  Clock::time_point next_judgement_{};
  std::set<int> out_armed_;  // the slots whose writability is in the epoll set
  LossHandler on_loss_;
  Locate locate_;
  std::function<void(int task)> on_unreachable_;
  std::function<void(int task)> on_bye_;
  // Root: holders whose answers may still come on a link they have not made yet, until when.
  std::map<int, Clock::time_point> awaited_answers_;
  std::map<LinkKind, Handler> handlers_;
  std::vector<std::string> hosts_;  // each task's host (expect())
  struct RootAt {
    std::string host;
    std::string address;
    int port = 0;
  };
  std::optional<RootAt> root_at_;            // another node: where the root listens (reach_root)
  std::optional<Loss> root_unreachable_;     // another node: its dial of the root failed at once
  Clock::time_point accept_paused_until_{};  // out of descriptors: the listener is not polled until then
  // What someone outside the job can provoke is logged bounded.
  WarningLimiter refusals_{"refused or closed connections on the node link"};
  WarningLimiter accept_failures_{"failed accepts on the node link", 1};
  bool lost_ = false;
  // Last: destroyed first, so that its thread has stopped before the peers' sockets close.
  std::unique_ptr<LinkWriter> writer_;
};

}  // namespace hyrun
