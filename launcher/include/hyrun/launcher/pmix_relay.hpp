#pragma once
// What the PMIx servers of one job's hyrun processes exchange across nodes, over their node
// link (node_link.hpp), whose lines are sealed with the job token's session keys; the lines
// are the link's kinds fence, fenced and dmodex-* (link_message.hpp), which the relay takes:
//  - Fences over the whole job. Each node's server hands hyrun its part of the job's n-th
//    fence once every rank of the node joined it; another node sends that part to the root
//    ("fence <n> <hex>"), the root joins every node's part in task order and sends the whole
//    to every node ("fenced <n> <hex>"), and each node completes its server's fence with it.
//    Fences over the whole job come in the same order on every node, so their numbers match.
//    Data longer than a line's piece travels in pieces (link_message.hpp, "more"); a fence
//    whose data is more than kMaxRelayedBytes (a node's part, or every node's together) fails
//    on every node with one line that says so ("fence-failed <n> <why>"), never as a loss.
//    With gather_through() (hybrid mode's default, OuterFence), the fences go through the
//    outer launcher's PMIx fence instead: each node hands in its part ("p" and the part, or
//    "f" and why it is too large), and every node completes (or fails) its fence from every
//    node's part, with no line on the link.
//  - Direct modex: a client wants the data of a rank of another node. The request
//    ("dmodex-get <id> <rank>") goes straight to the node that holds the rank, on a
//    connection of the asking node's own (direct_through(): NodeLink::ask), or, where there is
//    none (the root asks, the root holds the rank, the holder cannot be reached), to the
//    root, which asks the holder (or its own server). The holder's server answers once the
//    rank has committed, and the answer goes back the way the request came ("dmodex-data
//    <id> <hex>", or "dmodex-none <id>"). So the root carries no other nodes' data.
//
// Contract: what a line carries is checked (a known fence or request, a rank of the job,
// hex) before it is used; a line that fails is the end of the link (handle() returns false).
// A direct modex fails once its holder can answer no more (unreachable()); a request that
// cannot complete otherwise (no link, a lost node) fails when the relay goes: MPI_Init,
// MPI_Finalize or the PMIx_Get then fail rather than wait. A fence waits as long as every
// node that has not joined it is alive: a node that is lost ends the job, and the root's
// line names the ranks the fence waited for (waiting()).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyrun/common/job_layout.hpp"
#include "hyrun/launcher/pmix_service.hpp"
#include "hyrun/link/link_message.hpp"

namespace hyrun {

/// The most data one fence (every node's part together) or one direct modex carries between
/// nodes: the root holds it twice (the parts, the whole) and every node once more.
inline constexpr std::size_t kMaxRelayedBytes = std::size_t{256} << 20;

class PmixRelay final : public CrossNodeRequests {
 public:
  /// Sends a line's body to a task over the node link (NodeLink::send_to: a node's line to the
  /// root dials it on need); false when that task is not linked with this node (not yet, or
  /// no more): nothing was sent.
  using Send = std::function<bool(int task, const std::string& body)>;
  /// Root: sends a line's body to every other node (NodeLink::broadcast).
  using Broadcast = std::function<void(std::string body)>;
  /// The node link's kinds that carry the relay's lines (link_message.hpp): handle() takes them.
  static constexpr std::array<LinkKind, 7> kKinds{LinkKind::kFence,     LinkKind::kFenced,     LinkKind::kFenceFailed,
                                                  LinkKind::kDmodexGet, LinkKind::kDmodexData, LinkKind::kDmodexNone,
                                                  LinkKind::kMore};
  /// Asks this node's server for a rank's data (PmixService::serve_local_data).
  using ServeLocal = std::function<void(std::uint32_t rank, std::uint64_t id)>;
  /// Task `task` of the job laid out as `layout`; hosts[t]: task t's host (one a task).
  /// Without `send` (no node link) every request fails, said once. Throws Error when hosts
  /// and the layout's tasks differ in number. `max_bytes`: kMaxRelayedBytes but in tests.
  PmixRelay(int task, JobLayout layout, std::vector<std::string> hosts, Send send, Broadcast broadcast,
            ServeLocal serve_local, std::size_t max_bytes = kMaxRelayedBytes);

  void fence(std::shared_ptr<pmix::PendingRequest> fence) override;
  void direct_modex(std::uint32_t rank, std::shared_ptr<pmix::PendingRequest> request) override;

  /// Direct modex on connections of their own (NodeLink::ask, reply): `ask` sends a request
  /// straight to the holder (a node's to a node that is not the root; the root's to a holder
  /// not linked with it, which answers on its own link), `reply` an answer back on the asker's
  /// connection; false: there is no such connection (a node's request goes through the root,
  /// the root's is answered "none"; the answer is dropped: its asker is gone).
  using Direct = std::function<bool(int task, const std::string& body)>;
  void direct_through(Direct ask, Direct reply);
  /// What `ask` sent to `task` gets no answer (NodeLink::on_unreachable): it fails, and what
  /// the root passed on so is answered "none".
  void unreachable(int task);
  /// `task` answers nothing more (its bye at the root, its loss that the job goes on without):
  /// everything asked of it fails, and the root answers "none" for it.
  void gone(int task);
  void local_data(std::uint64_t id, bool ok, std::string data) override;

  /// A line's body from `from_task` on the link; false when it is not exactly one of the
  /// relay's kinds, or not one this end takes from that task now.
  bool handle(int from_task, std::string_view body);

  /// Fences go through `gather` (OuterFence::start) from now on, not over the link; the
  /// outcome comes back by gathered() or gather_failed().
  using Gather = std::function<void(std::uint64_t number, std::string part)>;
  void gather_through(Gather gather) { gather_ = std::move(gather); }
  /// Every node's part of fence `number`, in task order (nullopt: more than the limit, of
  /// `bytes` in all): completes this node's fence, or fails it with the reason a node gave.
  void gathered(std::uint64_t number, std::optional<std::vector<std::string>> parts, std::size_t bytes);
  /// The outer launcher failed fence `number`: this node's fence fails.
  void gather_failed(std::uint64_t number, const std::string& why);
  /// The fences across nodes this node took part in, and the bytes of its parts (--timings).
  std::uint64_t fences() const { return next_fence_; }
  std::uint64_t part_bytes() const { return part_bytes_; }

  /// Root: what the oldest open fence still waits for ("PMIx fence 2 (...) waits for ranks
  /// 4-7 on n2"); nullopt when no fence is open. With gather_through(), any node: the open
  /// fence, whose waiting ranks only the outer launcher knows.
  std::optional<std::string> waiting() const;

 private:
  struct OpenFence {
    std::map<int, std::string> parts;             // root: each task's part
    std::size_t bytes = 0;                        // root: of the parts
    std::shared_ptr<pmix::PendingRequest> local;  // this node's fence, until completed
    bool failed = false;                          // it fails on every node (its parts are dropped)
  };
  struct Routed {  // root: a direct modex it passed on, and whom to answer
    int task;
    std::uint64_t id;
    int holder;        // who may answer
    bool own = false;  // passed on on a connection of the root's own (ask_)
  };
  struct Asked {  // this node's direct modex
    std::shared_ptr<pmix::PendingRequest> request;
    int via;  // who may answer: the holder, or the root
  };
  struct Serving {     // a request this node's server answers
    int to;            // the asker (the root, or a node straight), or this node
    std::uint64_t id;  // the asker's id
    std::uint32_t rank;
  };
  bool usable(const std::shared_ptr<pmix::PendingRequest>& request);
  void complete_fences();
  bool take_part(int task, std::uint64_t number, std::string part);
  bool take_whole(std::uint64_t number, std::string all);
  bool take_failure(int from_task, std::uint64_t number, const std::string& why);
  // Fence `number` fails on every node: said here, told to the others (the root) or to the
  // root (a node whose own part is too large), and this node's fence fails when it is here.
  void fail_fence(std::uint64_t number, const std::string& why, int told_by);
  // The bytes of a numbered-bytes line from `task`: the pieces before it, then its own;
  // nullopt when together they are more than the limit (no hyrun of this version sends that).
  std::optional<std::string> assemble(int task, std::string last);
  bool take_piece(int task, std::string piece);
  // "12.0 MiB, more than the 256 MiB that hyrun relays between nodes ..."
  std::string too_much(std::size_t bytes, std::string_view what) const;
  std::string too_much_in(const OpenFence& open) const;
  void send_pieces(int task, const std::vector<std::string>& bodies);
  // Root: a direct modex of `rank` asked by `task` as its `id`.
  void route(int task, std::uint64_t id, std::uint32_t rank);
  // Root: a late part of failed fence `number` from `task`: it hears of the failure if the
  // word did not reach it then.
  void retell_failure(int task, std::uint64_t number);
  // What was asked of `task` fails (own_only: only what went on `ask_`'s connection).
  void fail_asked_of(int task, bool own_only);
  // Any node: serve `rank`'s data for `to`'s request `id`.
  void serve(int to, std::uint64_t id, std::uint32_t rank);
  // An answer from `from` to the request `id` of this node (requester) or of the root's
  // routing table; false when `from` is not who was asked.
  bool answer(int from, std::uint64_t id, std::optional<std::string> data);
  // The task that holds `rank` (a rank of the job: checked before).
  int holder_of(std::uint32_t rank) const { return layout_.task_of(static_cast<int>(rank)); }
  bool in_job(std::uint32_t rank) const { return rank < static_cast<std::uint32_t>(layout_.world_size()); }

  const int task_;
  const JobLayout layout_;
  const std::vector<std::string> hosts_;
  const std::size_t max_bytes_;
  Send send_;
  Broadcast broadcast_;
  ServeLocal serve_local_;
  Gather gather_;
  bool said_no_link_ = false;
  std::uint64_t next_fence_ = 0;        // this node's next fence number
  std::uint64_t part_bytes_ = 0;        // of this node's parts
  std::uint64_t completed_fences_ = 0;  // root: fences below this number are done
  std::map<std::uint64_t, OpenFence> fences_;
  // Root: failed fences done here, whose late parts are dropped. A node: fences it failed for
  // its own part, whose failure the root may announce too (once).
  std::set<std::uint64_t> failed_;
  // Root: the failed fences' word, and the nodes it did not reach (not linked yet): each hears
  // it when its part comes.
  struct Unreached {
    std::string line;
    std::set<int> tasks;
  };
  std::map<std::uint64_t, Unreached> unreached_;
  std::map<int, std::string> pieces_;  // each task's pieces of its next numbered-bytes line
  std::uint64_t next_id_ = 0;          // this node's requests (and, on the root, routed ones)
  Direct ask_;
  Direct reply_;
  std::map<std::uint64_t, Asked> asked_;
  std::map<std::uint64_t, Routed> routed_;    // root
  std::map<std::uint64_t, int> abandoned_;    // root: routed ids answered "none" for their holder (fail_asked_of)
  std::map<std::uint64_t, Serving> serving_;  // by the id given to this node's server
};

}  // namespace hyrun
