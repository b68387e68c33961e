#pragma once
// The complete environment of one rank: hyrun's own environment without what belongs to
// hyrun's launch (an outer job's HYRUN_* contract, the PMIx server's PMIX_* variables, which
// would make a rank believe it is hyrun's PMIx process), then the binding's variables, the
// user's -x exports, and the contract, later entries replacing earlier ones. Defaults
// (the contract's rendezvous defaults, MASTER_ADDR..., and `defaults`, e.g. OMP_NUM_THREADS)
// fill in only names that none of these set: a variable the user set always wins.
#include <string>
#include <utility>
#include <vector>

#include "hyrun/common/env_contract.hpp"

namespace hyrun {

using EnvironmentEntries = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> build_rank_environment(const RankEnvironment& contract, const EnvironmentEntries& binding,
                                                const std::vector<std::string>& exports,
                                                const EnvironmentEntries& defaults = {});

}  // namespace hyrun
