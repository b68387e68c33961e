#pragma once
// The result of a non-blocking PMIx call, waited for with our own deadline.
//
// Why not the blocking calls: PMIX_TIMEOUT is a request to the server, in whole seconds,
// and a server that ignores it (or a dead one) would leave a blocking call hanging forever.
// Every wait here ends by the deadline whatever the server does.
#include <pmix.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace hyrun::pmix {

/// Shared between the waiting thread and the PMIx progress thread that runs the callback.
/// The callback owns one reference, so a late callback after a timeout still writes into
/// live memory (it is released when the callback finally runs, or leaked if it never does).
class Completion {
 public:
  /// A new completion and the `cbdata` to hand to a *_nb call; the callback adopts it.
  static std::pair<std::shared_ptr<Completion>, void*> make();

  /// Callback for PMIx_Fence_nb and similar (pmix_op_cbfunc_t).
  static void on_operation(pmix_status_t status, void* cbdata);
  /// Callback for PMIx_Get_nb (pmix_value_cbfunc_t): copies the value as bytes.
  static void on_value(pmix_status_t status, pmix_value_t* value, void* cbdata);
  /// Drops the callback's reference when the *_nb call was refused (no callback will come).
  static void release(void* cbdata);

  /// Waits until the callback ran, `deadline` passed, or `stop` (checked every 20 ms, when
  /// given) returned true. The status, or nullopt on timeout or stop.
  std::optional<pmix_status_t> wait_until(std::chrono::steady_clock::time_point deadline,
                                          const std::function<bool()>& stop = {});

  /// The bytes delivered by on_value (empty for other callbacks); valid after wait_until.
  const std::vector<std::byte>& bytes() const { return bytes_; }
  /// Whether on_value got a value it could not read as bytes (wrong type).
  bool wrong_type() const { return wrong_type_; }

  /// Info array handed to the *_nb call. Kept here because the standard asks callers to
  /// keep it valid until the callback, which may come after we gave up waiting.
  /// Holds only scalar values (bool, int), so no destruction of payloads is needed.
  std::vector<pmix_info_t> info;

 private:
  void finish(pmix_status_t status);

  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  pmix_status_t status_ = PMIX_ERROR;
  std::vector<std::byte> bytes_;
  bool wrong_type_ = false;
};

}  // namespace hyrun::pmix
