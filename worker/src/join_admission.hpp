#pragma once
// Rank 0's admission of joins: the one check that every join passes, at the collective
// start (bootstrap.cpp) and for ranks that join later (World::accept_rejoins). A join comes
// alone, or with the others of its node in a bundle that the node's leader carries
// (node_leader.hpp); every join of a bundle passes the same check, or the bundle is refused
// whole. A wrong token, a malformed or replayed join is refused and logged, never fatal:
// anyone on the network can send one.
#include <cstddef>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "bootstrap_messages.hpp"
#include "communicator.hpp"

namespace hyrun {

namespace bootstrap {
/// The check of a join wherever it is taken (rank 0; a node's leader, node_leader.hpp):
/// `bytes` sealed under `envelope` is a join of a rank in 1..world_size-1 that its tag names,
/// sealed by the process whose address it carries. Decodes it into `join`; returns "" or why not.
std::string check_join(const auth::Envelope& envelope, std::span<const std::byte> bytes, int world_size,
                       JoinRequest& join);
}  // namespace bootstrap

class JoinAdmission {
 public:
  /// `comm` must outlive this object.
  explicit JoinAdmission(Communicator& comm) : comm_(comm) {}

  /// The next admitted join: one already taken in, or else receives join messages until one
  /// passes the check (refused ones are logged), until `until`; throws TimeoutError naming
  /// `what`.
  bootstrap::JoinRequest next(const std::string& what, Communicator::Clock::time_point until);
  /// The next admitted join already here, without waiting; nullopt when none is.
  std::optional<bootstrap::JoinRequest> poll();
  /// Forgets an admitted join's address (it was admitted, then turned away).
  void withdraw(const std::vector<std::byte>& address) { admitted_.erase(address); }
  /// How many join messages (a join alone, or a bundle) were admitted so far.
  int messages() const { return messages_; }

 private:
  /// The check of a join message: one join, or a bundle of them. Queues what it admits.
  Communicator::Check check_into();
  /// The check of one join sealed under `envelope`: bootstrap::check_join, and not admitted
  /// before (nor in `also`).
  std::string check_one(const auth::Envelope& envelope, std::span<const std::byte> bytes, bootstrap::JoinRequest& join,
                        const std::set<std::vector<std::byte>>& also) const;
  std::string check_bundle(const auth::Envelope& envelope, std::span<const std::byte> bytes,
                           std::vector<bootstrap::JoinRequest>& joins) const;
  /// The most joins a bundle may hold: a node's ranks.
  std::size_t most_joins() const;
  /// The most bytes a join message may hold: a bundle of most_joins() joins.
  std::size_t limit() const;

  Communicator& comm_;
  std::set<std::vector<std::byte>> admitted_;  // every address admitted
  std::deque<bootstrap::JoinRequest> queued_;  // admitted, not yet returned
  int messages_ = 0;
};

}  // namespace hyrun
