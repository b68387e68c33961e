#include "hyrun/ucx/context.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <ucs/debug/debug.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "hyrun/ucx/check.hpp"
#include "hyrun/ucx/memory.hpp"

namespace hyrun::ucx {

void ContextDeleter::operator()(ucp_context_h context) const noexcept {
  if (!MappedMemory::kept_until_exit(context)) ucp_cleanup(context);
}

Context make_context(uint64_t extra_features, const char* default_net_devices) {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "reading the UCX configuration (UCX_* variables)");
  if (default_net_devices && !std::getenv("UCX_NET_DEVICES")) {
    const ucs_status_t status = ucp_config_modify(config, "NET_DEVICES", default_net_devices);
    if (status != UCS_OK) ucp_config_release(config);
    check(status, fmt::format("setting UCX_NET_DEVICES={}", default_net_devices));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // WAKEUP: an idle wait blocks on the worker's event fd (Progress::wait_for_event). It
  // only keeps transports without events (self) off the message lanes; RMA lanes stay.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | extra_features;
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  check(status, "creating the UCP context");
  // UCX catches its debug signal (UCX_DEBUG_SIGNO, SIGHUP by default) even when it does
  // nothing with it, so a hang-up (a closed terminal, hyrun forwarding SIGHUP) would not
  // end the rank and hyrun would wait its whole grace period. Unless the user chose a
  // debug signal, SIGHUP gets back its usual meaning.
  if (std::getenv("UCX_DEBUG_SIGNO") == nullptr) ucs_debug_disable_signal(SIGHUP);
  return Context(context);
}

bool shared_memory_allowed() {
  const char* value = std::getenv("UCX_TLS");
  if (!value || !*value) return true;
  std::string tls = value;
  const bool exclude = tls.front() == '^';
  if (exclude) tls.erase(0, 1);
  bool names_shm = false, names_all = false;
  std::size_t start = 0;
  while (start <= tls.size()) {
    const std::size_t end = std::min(tls.find(',', start), tls.size());
    const std::string name = tls.substr(start, end - start);
    names_all |= name == "all";
    // UCX's shared-memory transports and the aliases that include them
    for (const char* shm : {"sm", "shm", "mm", "posix", "sysv", "xpmem", "cma", "knem"}) names_shm |= name == shm;
    start = end + 1;
  }
  return exclude ? !names_shm && !names_all : names_shm || names_all;
}

}  // namespace hyrun::ucx
