#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "hyrun/ucx/context.hpp"

namespace hyrun::ucx {
namespace {

// Sets UCX_TLS (or unsets it) for one check and restores the caller's value.
class TlsSetting {
 public:
  explicit TlsSetting(const char* value) {
    if (const char* old = std::getenv("UCX_TLS")) old_ = old;
    value ? setenv("UCX_TLS", value, 1) : unsetenv("UCX_TLS");
  }
  ~TlsSetting() { old_ ? setenv("UCX_TLS", old_->c_str(), 1) : unsetenv("UCX_TLS"); }

 private:
  std::optional<std::string> old_;
};

bool allowed_with(const char* tls) {
  TlsSetting setting(tls);
  return shared_memory_allowed();
}

// Endpoints within a node go without peer error handling only when UCX may use shared
// memory: a wrong answer either loses shared memory or lets UCX abort on a dead peer.
TEST(SharedMemoryAllowed, FollowsUcxTls) {
  EXPECT_TRUE(allowed_with(nullptr));
  EXPECT_TRUE(allowed_with(""));
  EXPECT_TRUE(allowed_with("all"));
  EXPECT_TRUE(allowed_with("sm,self"));
  EXPECT_TRUE(allowed_with("tcp,posix,self"));
  EXPECT_TRUE(allowed_with("^ib"));
  EXPECT_FALSE(allowed_with("tcp,self"));
  EXPECT_FALSE(allowed_with("tcp"));
  EXPECT_FALSE(allowed_with("rc,ud,self"));
  EXPECT_FALSE(allowed_with("^sm"));
  EXPECT_FALSE(allowed_with("^posix,sysv,cma"));
}

}  // namespace
}  // namespace hyrun::ucx
