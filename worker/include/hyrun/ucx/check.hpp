#pragma once
// Turning a UCX status into an exception, for every owner of this layer and its users.
#include <ucp/api/ucp.h>

#include <string>

namespace hyrun::ucx {

/// Throws hyrun::Error "what: <UCX status string>" unless status is UCS_OK.
void check(ucs_status_t status, const std::string& what);

}  // namespace hyrun::ucx
