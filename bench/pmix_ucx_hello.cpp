// The reference of bench/launch-slurm.sh: the PMIx-native way to connect ranks that srun
// starts directly (one rank per Slurm task). Every rank creates a UCX worker, puts its
// address, fences, gets every address, connects to every rank and exchanges one message
// with each; then it prints when it was connected, as hello --timestamps does under hyrun.
// `--startup-ms MS` first sleeps MS, as hello --startup-ms does: a program that initialises
// CUDA or loads a model before it connects.
#include <ucp/api/ucp.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/client.hpp"

namespace {

void check(ucs_status_t s, const char* what) {
  if (s != UCS_OK) throw hyrun::Error(std::string(what) + ": " + ucs_status_string(s));
}

void wait(ucp_worker_h worker, void* request) {
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) check(UCS_PTR_STATUS(request), "UCX request");
  while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker);
  ucp_request_free(request);
}

long long realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 1) {
      int ms = -1;
      const std::string_view value = argc == 3 ? argv[2] : "";
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
      if (argc != 3 || std::string_view(argv[1]) != "--startup-ms" || ec != std::errc() ||
          end != value.data() + value.size() || ms < 0)
        throw hyrun::UsageError("pmix-ucx-hello takes no argument but --startup-ms MS (MS >= 0)");
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    auto pmix = hyrun::pmix::Client::connect();
    if (!pmix) throw hyrun::Error("pmix-ucx-hello: not started by a PMIx server");
    const int rank = pmix->rank(), size = pmix->job_size();

    ucp_config_t* config;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucp_context_h raw_context;
    check(ucp_init(&params, config, &raw_context), "ucp_init");
    ucp_config_release(config);
    std::unique_ptr<std::remove_pointer_t<ucp_context_h>, decltype(&ucp_cleanup)> context(raw_context, ucp_cleanup);
    ucp_worker_params_t wparams{};
    ucp_worker_h raw_worker;
    check(ucp_worker_create(context.get(), &wparams, &raw_worker), "ucp_worker_create");
    std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, decltype(&ucp_worker_destroy)> worker(raw_worker,
                                                                                               ucp_worker_destroy);
    ucp_address_t* address;
    size_t address_length;
    check(ucp_worker_get_address(worker.get(), &address, &address_length), "ucp_worker_get_address");
    pmix->put("ucx.address", {reinterpret_cast<const std::byte*>(address), address_length});
    ucp_worker_release_address(worker.get(), address);
    pmix->commit();
    pmix->fence(std::chrono::seconds(60));

    std::vector<ucp_ep_h> endpoints(size);
    for (int peer = 0; peer < size; ++peer) {
      const auto bytes = pmix->get(peer, "ucx.address", std::chrono::seconds(60));
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep.address = reinterpret_cast<const ucp_address_t*>(bytes.data());
      check(ucp_ep_create(worker.get(), &ep, &endpoints[peer]), "ucp_ep_create");
    }
    // One message to and from every rank: each pair has really talked.
    std::vector<void*> sends;
    const long long token = rank;
    ucp_request_param_t none{};
    for (int peer = 0; peer < size; ++peer)
      sends.push_back(ucp_tag_send_nbx(endpoints[peer], &token, sizeof token, static_cast<ucp_tag_t>(rank), &none));
    std::vector<long long> got(size);
    for (int peer = 0; peer < size; ++peer)
      wait(worker.get(), ucp_tag_recv_nbx(worker.get(), &got[peer], sizeof(long long), static_cast<ucp_tag_t>(peer),
                                          ~ucp_tag_t{0}, &none));
    for (void* s : sends) wait(worker.get(), s);
    std::printf("connected_ns=%lld rank=%d\n", realtime_ns(), rank);
    std::fflush(stdout);
    pmix->fence(std::chrono::seconds(60));  // nobody closes before everyone is done
    std::vector<void*> closing;
    for (ucp_ep_h ep : endpoints) closing.push_back(ucp_ep_close_nbx(ep, &none));
    for (void* c : closing) wait(worker.get(), c);
  } catch (const hyrun::Error& e) {
    std::fprintf(stderr, "pmix-ucx-hello: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
