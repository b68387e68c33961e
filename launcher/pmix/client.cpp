#include "hyrun/pmix/client.hpp"

#include <pmix.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hyrun/common/error.hpp"
#include "hyrun/pmix/completion.hpp"
#include "hyrun/pmix/status.hpp"
#include "hyrun/pmix/value.hpp"

namespace hyrun::pmix {

namespace {

using Clock = std::chrono::steady_clock;

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

pmix_proc_t make_proc(const std::string& nspace, pmix_rank_t rank) {
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  PMIX_LOAD_PROCID(&proc, nspace.c_str(), rank);
  return proc;
}

/// A value from the local store only (PMIX_OPTIONAL: never asks the server, so it cannot
/// hang); nullopt when the server did not provide the key. Used for job and process
/// information that PMIx_Init already delivered.
template <class Read>
auto get_local(const pmix_proc_t& proc, const char* key, Read read) -> decltype(read(pmix_value_t{})) {
  pmix_info_t optional;
  PMIX_INFO_CONSTRUCT(&optional);
  bool yes = true;
  PMIX_INFO_LOAD(&optional, PMIX_OPTIONAL, &yes, PMIX_BOOL);
  pmix_value_t* value = nullptr;
  const pmix_status_t rc = PMIx_Get(&proc, key, &optional, 1, &value);
  PMIX_INFO_DESTRUCT(&optional);
  if (rc != PMIX_SUCCESS || value == nullptr) {
    spdlog::debug("pmix: {} of rank {} not provided: {}", key, proc.rank, describe_status(rc));
    return std::nullopt;
  }
  auto result = read(*value);
  PMIX_VALUE_RELEASE(value);
  return result;
}

std::optional<std::int64_t> get_local_integer(const pmix_proc_t& proc, const char* key) {
  return get_local(proc, key, [](const pmix_value_t& v) { return integer_of(v); });
}

/// PMIX_TIMEOUT is an int in seconds: round up so the server never gives up before we do.
int whole_seconds(std::chrono::milliseconds timeout) {
  return static_cast<int>(std::max<std::int64_t>(1, (timeout.count() + 999) / 1000));
}

pmix_info_t timeout_info(std::chrono::milliseconds timeout) {
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  int seconds = whole_seconds(timeout);
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
  return info;
}

std::int64_t elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// One line for logs (ClientIdentity::description).
std::string description_of(const ClientIdentity& id) {
  std::string where = "node " + id.hostname + " (";
  const char* job = env_or_null("SLURM_JOB_ID");
  const char* step = env_or_null("SLURM_STEP_ID");
  if (job && step && id.nspace.rfind("slurm.", 0) == 0)
    where += "slurm job " + std::string(job) + " step " + step;
  else
    where += "pmix nspace " + id.nspace;
  return where + ", rank " + std::to_string(id.rank) + " of " + std::to_string(id.job_size) + ")";
}

}  // namespace

std::optional<Client> Client::connect() {
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  const auto start = Clock::now();
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc == PMIX_ERR_UNREACH) {
    // A server was announced and cannot be reached (one of an ended job): no PMIx_Finalize,
    // which in libpmix 4.2.2 dereferences NULL after such an init (SIGSEGV in the helper,
    // whose end then said nothing of the server); the helper's own end releases what is held.
    if (const char* ns = env_or_null("PMIX_NAMESPACE"))
      throw Error("PMIx server of namespace " + std::string(ns) +
                  " (announced by PMIX_NAMESPACE and PMIX_SERVER_URI*) is unreachable: " + describe_status(rc));
    // No server announced: PMIx has made us a singleton (nspace "singleton.<host>.<pid>"); we
    // only want to know that no server launched us, so give the singleton back.
    PMIx_Finalize(nullptr, 0);
    spdlog::debug("pmix: no PMIx server (PMIx_Init: {})", describe_status(rc));
    return std::nullopt;
  }
  throw_if_failed(rc, "PMIx_Init");

  Client client;
  client.connected_ = true;  // from here on the destructor finalises
  ClientIdentity& id = client.identity_;
  id.nspace = me.nspace;
  id.rank = static_cast<int>(me.rank);

  const pmix_proc_t job = make_proc(id.nspace, PMIX_RANK_WILDCARD);
  const auto size = get_local_integer(job, PMIX_JOB_SIZE);
  if (!size || *size < 1) throw Error("PMIx server of namespace " + id.nspace + " did not provide PMIX_JOB_SIZE");
  id.job_size = static_cast<int>(*size);

  if (auto host = get_local(me, PMIX_HOSTNAME, [](const pmix_value_t& v) { return string_of(v); })) {
    id.hostname = *host;
  } else if (const char* slurm_node = env_or_null("SLURMD_NODENAME")) {
    id.hostname = slurm_node;
  } else {
    char buffer[256] = {};
    gethostname(buffer, sizeof buffer - 1);
    id.hostname = buffer;
    spdlog::warn("pmix: server gave no PMIX_HOSTNAME and SLURMD_NODENAME is unset; using gethostname() '{}'",
                 id.hostname);
  }
  if (auto node = get_local_integer(me, PMIX_NODEID)) id.node_id = static_cast<std::uint32_t>(*node);
  if (auto local = get_local_integer(me, PMIX_LOCAL_RANK)) id.local_rank = static_cast<int>(*local);
  auto local_size = get_local_integer(job, PMIX_LOCAL_SIZE);
  if (!local_size) local_size = get_local_integer(me, PMIX_LOCAL_SIZE);
  if (local_size && *local_size > 0) id.local_size = static_cast<int>(*local_size);
  id.description = description_of(id);

  spdlog::debug("pmix: connected as {} in {} ms", client.describe(), elapsed_ms(start));
  return client;
}

Client::~Client() { finalize(); }

std::optional<std::string> Client::hostname_of(int rank) const {
  const pmix_proc_t proc = make_proc(nspace(), static_cast<pmix_rank_t>(rank));
  return get_local(proc, PMIX_HOSTNAME, [](const pmix_value_t& v) { return string_of(v); });
}

Client::Client(Client&& other) noexcept
    : ClientApi(std::move(other)), connected_(std::exchange(other.connected_, false)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    finalize();
    ClientApi::operator=(std::move(other));
    connected_ = std::exchange(other.connected_, false);
  }
  return *this;
}

void Client::finalize() noexcept {
  if (!std::exchange(connected_, false)) return;
  const pmix_status_t rc = PMIx_Finalize(nullptr, 0);
  if (rc != PMIX_SUCCESS) spdlog::warn("pmix: PMIx_Finalize of {}: {}", nspace(), describe_status(rc));
}

void Client::put(const std::string& key, std::span<const std::byte> value) {
  pmix_value_t pv;
  PMIX_VALUE_CONSTRUCT(&pv);
  pv.type = PMIX_BYTE_OBJECT;
  // PMIx_Put copies the bytes, so pointing at the caller's buffer is enough.
  pv.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(value.data()));
  pv.data.bo.size = value.size();
  throw_if_failed(PMIx_Put(PMIX_GLOBAL, key.c_str(), &pv),
                  "PMIx_Put of key '" + key + "' (" + std::to_string(value.size()) + " bytes) by " + describe());
}

void Client::commit() { throw_if_failed(PMIx_Commit(), "PMIx_Commit by " + describe()); }

bool Client::fence(std::chrono::milliseconds timeout, const std::function<bool()>& stop) {
  const std::string what = "fence over all " + std::to_string(job_size()) + " processes of PMIx namespace " + nspace();
  auto [completion, cbdata] = Completion::make();
  const bool unlimited = timeout == kNoLimit;
  completion->info.resize(unlimited ? 1 : 2);
  PMIX_INFO_CONSTRUCT(&completion->info[0]);
  bool collect = true;
  PMIX_INFO_LOAD(&completion->info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  if (!unlimited) completion->info[1] = timeout_info(timeout);

  const auto start = Clock::now();
  const auto deadline = unlimited ? Clock::time_point::max() : start + timeout;
  const pmix_status_t rc =
      PMIx_Fence_nb(nullptr, 0, completion->info.data(), completion->info.size(), &Completion::on_operation, cbdata);
  if (rc != PMIX_SUCCESS) {
    Completion::release(cbdata);  // refused: no callback will come
    if (rc == PMIX_OPERATION_SUCCEEDED) return true;
    throw_if_failed(rc, what + " by " + describe());
  }
  const auto status = completion->wait_until(deadline, stop);
  if (!status && stop && Clock::now() < deadline) {
    spdlog::debug("pmix: {} abandoned after {} ms: stop requested", what, elapsed_ms(start));
    return false;
  }
  if (!status)
    throw TimeoutError(what + " did not complete within " + std::to_string(timeout.count()) +
                       " ms: not every process reached the fence (" + describe() + " waited for the others)");
  if (*status == PMIX_ERR_TIMEOUT)
    throw TimeoutError(what + " timed out in the PMIx server after " + std::to_string(elapsed_ms(start)) +
                       " ms (limit " + std::to_string(timeout.count()) + " ms): not every process reached the fence (" +
                       describe() + ")");
  throw_if_failed(*status, what + " by " + describe());
  spdlog::debug("pmix: {} took {} ms", what, elapsed_ms(start));
  return true;
}

struct Client::PendingGet {
  std::shared_ptr<Completion> completion;
  std::string what;  // "PMIx_Get of key 'k' from rank r of namespace n"
  int rank = 0;
  Clock::time_point start;
};

Client::PendingGet Client::start_get(int rank, const std::string& key, std::chrono::milliseconds timeout) const {
  PendingGet get;
  get.what = "PMIx_Get of key '" + key + "' from rank " + std::to_string(rank) + " of namespace " + nspace();
  get.rank = rank;
  if (rank < 0 || rank >= job_size())
    throw Error(get.what + ": rank out of range, the job has " + std::to_string(job_size()) + " processes");
  const pmix_proc_t proc = make_proc(nspace(), static_cast<pmix_rank_t>(rank));
  auto [completion, cbdata] = Completion::make();
  completion->info.push_back(timeout_info(timeout));
  get.completion = std::move(completion);
  get.start = Clock::now();
  const pmix_status_t rc = PMIx_Get_nb(&proc, key.c_str(), get.completion->info.data(), get.completion->info.size(),
                                       &Completion::on_value, cbdata);
  if (rc != PMIX_SUCCESS) {
    Completion::release(cbdata);
    throw_if_failed(rc, get.what + " by " + describe());
  }
  return get;
}

std::optional<std::vector<std::byte>> Client::finish_get(const PendingGet& get, Clock::time_point deadline,
                                                         std::chrono::milliseconds timeout,
                                                         const std::function<bool()>& stop) const {
  const auto status = get.completion->wait_until(deadline, stop);
  if (!status && stop && Clock::now() < deadline) return std::nullopt;  // stop said so
  if (!status || *status == PMIX_ERR_TIMEOUT)
    throw TimeoutError(get.what + " found no value within " + std::to_string(timeout.count()) + " ms (waited " +
                       std::to_string(elapsed_ms(get.start)) + " ms; expected rank " + std::to_string(get.rank) +
                       " to put and commit it)");
  if (*status == PMIX_ERR_NOT_FOUND)
    throw Error(get.what + ": no such key (" + describe_status(*status) + "); expected rank " +
                std::to_string(get.rank) + " to put and commit it before the fence");
  throw_if_failed(*status, get.what + " by " + describe());
  if (get.completion->wrong_type()) throw Error(get.what + ": the value is neither a byte object nor a string");
  spdlog::trace("pmix: {} took {} ms", get.what, elapsed_ms(get.start));
  return get.completion->bytes();
}

std::vector<std::byte> Client::get(int rank, const std::string& key, std::chrono::milliseconds timeout) {
  const PendingGet pending = start_get(rank, key, timeout);
  return *finish_get(pending, pending.start + timeout, timeout);
}

bool Client::get_each(const std::vector<Wanted>& wanted, std::chrono::milliseconds timeout,
                      const std::function<void(int rank, std::vector<std::byte> value)>& take,
                      const std::function<bool()>& stop) const {
  // All in flight at once: a server that answers from its own store (the hash store) takes
  // them in turn, and the local store answers at once. A get abandoned here (an error, a
  // stop) still gets its callback into live memory (completion.hpp).
  std::vector<PendingGet> pending;
  for (const Wanted& w : wanted)
    for (int rank = w.first_rank; rank < w.first_rank + w.ranks; ++rank)
      pending.push_back(start_get(rank, w.key, timeout));
  auto since = Clock::now();  // each value may take `timeout` after the one before it
  for (const PendingGet& get : pending) {
    auto value = finish_get(get, since + timeout, timeout, stop);
    if (!value) return false;
    take(get.rank, std::move(*value));
    since = Clock::now();
  }
  return true;
}

std::optional<std::vector<std::vector<std::byte>>> Client::get_many(const std::vector<Wanted>& wanted,
                                                                    std::chrono::milliseconds timeout,
                                                                    const std::function<bool()>& stop) {
  std::vector<std::vector<std::byte>> values;
  const bool done = get_each(
      wanted, timeout, [&values](int, std::vector<std::byte> value) { values.push_back(std::move(value)); }, stop);
  if (!done) return std::nullopt;
  return values;
}

void Client::abort(int status, const std::string& message) {
  const int code = exit_code::of_failure_status(status);
  spdlog::error("pmix: aborting the whole job from {}: {}", describe(), message);
  spdlog::default_logger()->flush();
  // NULL procs: every process of our namespace.
  const pmix_status_t rc = PMIx_Abort(code, message.c_str(), nullptr, 0);
  if (rc != PMIX_SUCCESS) spdlog::error("pmix: PMIx_Abort: {}", describe_status(rc));
  spdlog::default_logger()->flush();
  // The server normally kills us; if it does not, leave without PMIx_Finalize, whose
  // implicit synchronisation could block on processes that are being killed.
  std::_Exit(code);
}

}  // namespace hyrun::pmix
