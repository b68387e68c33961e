#include "join_admission.hpp"

#include <fmt/format.h>

#include "message_tag.hpp"

namespace hyrun {

Communicator::Check JoinAdmission::check_into(std::optional<bootstrap::JoinRequest>& join) {
  return [this, &join](const auth::Envelope& envelope, std::vector<std::byte>& bytes) -> std::string {
    bootstrap::JoinRequest candidate;
    try {
      candidate = bootstrap::decode_join(bytes);
    } catch (const Error& e) {
      return e.what();
    }
    const int size = comm_.contract().world_size;
    if (candidate.rank <= 0 || candidate.rank >= size)
      return fmt::format("rank {} is outside the world of {}", candidate.rank, size);
    if (candidate.rank != tag::source_of(envelope.tag))
      return fmt::format("the tag names rank {}, the join rank {}", tag::source_of(envelope.tag), candidate.rank);
    if (envelope.source != auth::process_id(candidate.address))
      return "sealed by another process than the one whose address it carries";
    if (admitted_.contains(candidate.address))
      return fmt::format("rank {} with this address was already admitted (a replay)", candidate.rank);
    admitted_.insert(candidate.address);
    join = std::move(candidate);
    return "";
  };
}

bootstrap::JoinRequest JoinAdmission::next(const std::string& what, Communicator::Clock::time_point until) {
  std::optional<bootstrap::JoinRequest> join;
  comm_.recv_authentic(tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, bootstrap::kMaxJoinBytes, what, until, -1,
                       check_into(join));
  return std::move(*join);
}

std::optional<bootstrap::JoinRequest> JoinAdmission::poll() {
  ucp_worker_h worker = comm_.worker();
  for (;;) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker, tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, 1, &info);
    if (!message) return std::nullopt;
    std::optional<bootstrap::JoinRequest> join;
    if (comm_.accept_message(message, info, bootstrap::kMaxJoinBytes, check_into(join))) return join;
  }
}

}  // namespace hyrun
