#pragma once
// Turning PMIx status codes into text and into hyrun errors.
#include <pmix.h>

#include <string>

namespace hyrun::pmix {

/// "PMIX_ERR_TIMEOUT (-24)": the library's name for `status` and its number.
std::string describe_status(pmix_status_t status);

/// Throws hyrun::Error (TimeoutError for PMIX_ERR_TIMEOUT) saying "`what` failed: <status>"
/// unless `status` is PMIX_SUCCESS.
void throw_if_failed(pmix_status_t status, const std::string& what);

}  // namespace hyrun::pmix
