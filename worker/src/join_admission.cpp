#include "join_admission.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "message_tag.hpp"

namespace hyrun {

std::string bootstrap::check_join(const auth::Envelope& envelope, std::span<const std::byte> bytes, int world_size,
                                  JoinRequest& join) {
  try {
    join = decode_join(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  if (join.rank <= 0 || join.rank >= world_size)
    return fmt::format("rank {} is outside the world of {}", join.rank, world_size);
  if (join.rank != tag::source_of(envelope.tag))
    return fmt::format("the tag names rank {}, the join rank {}", tag::source_of(envelope.tag), join.rank);
  if (envelope.source != auth::process_id(join.address))
    return "sealed by another process than the one whose address it carries";
  return "";
}

std::string JoinAdmission::check_one(const auth::Envelope& envelope, std::span<const std::byte> bytes,
                                     bootstrap::JoinRequest& join, const std::set<std::vector<std::byte>>& also) const {
  if (auto why = bootstrap::check_join(envelope, bytes, comm_.contract().world_size, join); !why.empty()) return why;
  if (admitted_.contains(join.address) || also.contains(join.address))
    return fmt::format("rank {} with this address was already admitted (a replay)", join.rank);
  return "";
}

std::string JoinAdmission::check_bundle(const auth::Envelope& envelope, std::span<const std::byte> bytes,
                                        std::vector<bootstrap::JoinRequest>& joins) const {
  std::vector<std::vector<std::byte>> sealed;
  try {
    sealed = bootstrap::decode_bundle(bytes, most_joins());
  } catch (const Error& e) {
    return e.what();
  }
  std::set<std::vector<std::byte>> in_bundle;
  bool from_its_leader = false;
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    const auto carried = comm_.open_carried(sealed[i]);
    if (!carried) return fmt::format("join {} of the bundle is not sealed with this job's key", i + 1);
    if (carried->destination != comm_.own_id() ||
        carried->tag != tag::make(tag::Kind::kJoin, tag::source_of(carried->tag), tag::kOneJoin))
      return fmt::format("join {} of the bundle was sealed for another tag or process (a replay)", i + 1);
    bootstrap::JoinRequest join;
    if (const auto why = check_one(*carried, sealed[i], join, in_bundle); !why.empty())
      return fmt::format("join {} of the bundle: {}", i + 1, why);
    from_its_leader |= join.rank == tag::source_of(envelope.tag) && carried->source == envelope.source;
    in_bundle.insert(join.address);
    joins.push_back(std::move(join));
  }
  if (!from_its_leader)
    return fmt::format("not sent by rank {}, which it names as its carrier, with its own join",
                       tag::source_of(envelope.tag));
  return "";
}

Communicator::Check JoinAdmission::check_into() {
  return [this](const auth::Envelope& envelope, std::vector<std::byte>& bytes) -> std::string {
    std::vector<bootstrap::JoinRequest> joins;
    std::string why;
    if (tag::payload_of(envelope.tag) == tag::kJoinBundle) {
      why = check_bundle(envelope, bytes, joins);
    } else if (tag::payload_of(envelope.tag) == tag::kOneJoin) {
      why = check_one(envelope, bytes, joins.emplace_back(), {});
    } else {
      why = fmt::format("a join message of no known kind ({})", tag::payload_of(envelope.tag));
    }
    if (!why.empty()) return why;
    for (auto& join : joins) {
      admitted_.insert(join.address);
      queued_.push_back(std::move(join));
    }
    ++messages_;
    return "";
  };
}

std::size_t JoinAdmission::most_joins() const {
  // Every hyrun of a job starts the same number of ranks (-n), rank 0's hyrun among them.
  const auto& contract = comm_.contract();
  return static_cast<std::size_t>(std::max(1, std::min(contract.local_world_size, contract.world_size - 1)));
}

std::size_t JoinAdmission::limit() const { return bootstrap::max_bundle_bytes(most_joins()); }

bootstrap::JoinRequest JoinAdmission::next(const std::string& what, Communicator::Clock::time_point until) {
  if (queued_.empty())
    comm_.recv_authentic(tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, limit(), what, until, -1, check_into());
  auto join = std::move(queued_.front());
  queued_.pop_front();
  return join;
}

std::optional<bootstrap::JoinRequest> JoinAdmission::poll() {
  ucp_worker_h worker = comm_.worker();
  while (queued_.empty()) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker, tag::make(tag::Kind::kJoin, 0, 0), tag::kKindMask, 1, &info);
    if (!message) return std::nullopt;
    comm_.accept_message(message, info, limit(), check_into());
  }
  auto join = std::move(queued_.front());
  queued_.pop_front();
  return join;
}

}  // namespace hyrun
