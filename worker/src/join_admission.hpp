#pragma once
// Rank 0's admission of joins: the one check that every join passes, at the collective
// start (bootstrap.cpp) and for ranks that join later (World::accept_rejoins). A wrong
// token, a malformed or replayed join is refused and logged, never fatal: anyone on the
// network can send one.
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bootstrap_messages.hpp"
#include "communicator.hpp"

namespace hyrun {

class JoinAdmission {
 public:
  /// `comm` must outlive this object.
  explicit JoinAdmission(Communicator& comm) : comm_(comm) {}

  /// Receives joins until one passes the check (refused ones are logged), until `until`;
  /// throws TimeoutError naming `what`.
  bootstrap::JoinRequest next(const std::string& what, Communicator::Clock::time_point until);
  /// The first acceptable join already here, without waiting; nullopt when none is.
  std::optional<bootstrap::JoinRequest> poll();
  /// Forgets an admitted join's address (it was admitted, then turned away).
  void withdraw(const std::vector<std::byte>& address) { admitted_.erase(address); }

 private:
  /// The check: a join of a rank in 1..size-1 matching its tag, sealed by the process
  /// whose address it carries, not admitted before. Records the address of one it passes.
  Communicator::Check check_into(std::optional<bootstrap::JoinRequest>& join);

  Communicator& comm_;
  std::set<std::vector<std::byte>> admitted_;  // every address admitted
};

}  // namespace hyrun
