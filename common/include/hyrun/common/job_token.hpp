#pragma once
#include <string>

namespace hyrun {

/// A fresh random job token (32 hex digits from the kernel's CSPRNG). Rank 0 accepts
/// only peers that present the token of its own job.
std::string make_job_token();

}  // namespace hyrun
