#include "failure_agreement.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hyrun/common/error.hpp"

namespace hyrun::ep::elastic {

uint64_t phase_epoch(std::size_t global_phase, int failure_round) {
  return (static_cast<uint64_t>(global_phase + 1) << 32) + (static_cast<uint64_t>(failure_round) << 24);
}

FailureAgreement::FailureAgreement(std::vector<char> active, std::size_t global_phase)
    : active_(std::move(active)),
      global_phase_(global_phase),
      failed_(active_.size(), 0),
      round_failed_(active_.size(), 0) {}

void FailureAgreement::begin_round(const std::vector<int>& seen, int iteration) {
  round_failed_ = failed_;
  iteration_ = iteration;
  next_ = 1;
  count_failed(0, seen);
}

std::optional<int> FailureAgreement::next_reporter(const std::function<bool(int)>& known_dead) {
  for (; next_ < active_.size(); ++next_) {
    const int r = static_cast<int>(next_);
    if (!active_[next_] || round_failed_[next_]) continue;
    if (known_dead(r)) {
      round_failed_[next_] = 1;
      continue;
    }
    return r;
  }
  return std::nullopt;
}

void FailureAgreement::add_report(int from, const msg::Failed& report) {
  count_failed(from, report.ranks);
  iteration_ = std::max(iteration_, report.iteration);
  ++next_;
}

void FailureAgreement::count_failed(int from, const std::vector<int>& ranks) {
  for (int r : ranks) {
    if (r < 0 || static_cast<std::size_t>(r) >= active_.size())
      throw Error(fmt::format("rank 0: rank {} reports rank {} failed, outside the world of {} ranks", from, r,
                              active_.size()));
    if (r == 0)
      throw Error(
          fmt::format("rank 0: rank {} reports the coordinator (rank 0) failed, but it is alive; the link "
                      "between them is broken",
                      from));
    round_failed_[static_cast<std::size_t>(r)] = 1;
  }
}

FailureAgreement::Decision FailureAgreement::decide() {
  Decision d;
  for (std::size_t r = 0; r < active_.size(); ++r) {
    if (round_failed_[r] && !failed_[r]) d.resume.ranks.push_back(static_cast<int>(r));
    if (r != 0 && active_[r] && !round_failed_[r]) d.survivors.push_back(static_cast<int>(r));
  }
  failed_ = round_failed_;
  d.resume.epoch = phase_epoch(global_phase_, ++rounds_);
  d.resume.iteration = iteration_;
  return d;
}

}  // namespace hyrun::ep::elastic
