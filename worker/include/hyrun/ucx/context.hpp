#pragma once
// The UCP context: the root of the UCX handles (workers and memory mappings are made
// from it and must be released before it).
#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <type_traits>

namespace hyrun::ucx {

/// Cleans the context up, unless a mapping made from it is kept until the process exits
/// (MappedMemory::keep_until_exit): UCX asserts on a context destroyed under a mapped
/// region, so such a context is left to the process's exit too.
struct ContextDeleter {
  void operator()(ucp_context_h context) const noexcept;
};
using Context = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, ContextDeleter>;

/// A UCP context with tag matching plus `extra_features`. `default_net_devices`, when
/// given, is used as UCX_NET_DEVICES unless the user set that variable. Unless the user
/// set UCX_DEBUG_SIGNO, SIGHUP keeps its usual meaning (UCX would catch it). Throws Error.
Context make_context(uint64_t extra_features, const char* default_net_devices = nullptr);

/// Whether UCX_TLS (as set in the environment) lets UCX use a shared-memory transport.
/// UCX 1.13 uses none on endpoints with peer error handling, and reports no peer failure
/// through one, so only endpoints that may use shared memory can do without it.
bool shared_memory_allowed();

}  // namespace hyrun::ucx
