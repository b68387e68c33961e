#pragma once
// A server of hyrun's that the ranks it starts talk to (PMIx, PMI): what each rank's
// environment and descriptors get from it. NodeLaunch asks every service it was given, so
// that starting ranks knows no protocol, and a launch without a server (ep-elastic's staged
// launches) needs none of their libraries.
#include <memory>
#include <optional>
#include <utility>

#include "hyrun/common/unique_fd.hpp"
#include "hyrun/launcher/rank_environment.hpp"

namespace hyrun {

class RankService {
 public:
  virtual ~RankService() = default;

  /// Variables `global_rank` must have: they replace inherited ones (the user's -x still wins).
  virtual EnvironmentEntries rank_variables(int global_rank) const = 0;
  /// Variables every rank gets unless it has them already.
  virtual EnvironmentEntries rank_defaults() const { return {}; }
  /// A descriptor for a new process of `global_rank` and the number it gets there; nullopt
  /// when the service gives none. Throws SystemError when the system has none to give.
  virtual std::optional<std::pair<std::shared_ptr<UniqueFd>, int>> rank_descriptor(int) { return std::nullopt; }
};

}  // namespace hyrun
