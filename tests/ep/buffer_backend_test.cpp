// The EP front's backend choice (--backend of ep-check and ep-bench) on a machine without
// a usable GPU, as CI has: host stays host, auto falls back to host, cuda is refused with
// the reason and what to use instead, an unknown name is named.
#include <gtest/gtest.h>

#include "hyrun/common/error.hpp"
#include "hyrun/ep/buffer.hpp"

using namespace hyrun::ep;

namespace {
bool gpu_here() {
  std::string why;
  return select_cuda_device(0, &why);
}
std::string usage_error_of(const std::string& name) {
  try {
    choose_backend(name, false, 0, 1);
  } catch (const hyrun::UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(BufferBackend, HostIsHostAnywhere) {
  EXPECT_EQ(choose_backend("host", false, 0, 1), Backend::kHost);
  EXPECT_EQ(choose_backend("host", true, 3, 4), Backend::kHost);
}

TEST(BufferBackend, UnknownNameIsNamed) {
  const auto m = usage_error_of("gpu");
  EXPECT_NE(m.find("--backend 'gpu'"), std::string::npos) << m;
  EXPECT_NE(m.find("host, cuda or auto"), std::string::npos) << m;
}

TEST(BufferBackend, WithoutGpuAutoIsHostAndCudaIsRefusedWithTheReason) {
  if (gpu_here()) GTEST_SKIP() << "a GPU answers here";
  EXPECT_EQ(choose_backend("auto", false, 0, 1), Backend::kHost);
  const auto m = usage_error_of("cuda");
  EXPECT_NE(m.find("--backend cuda: "), std::string::npos) << m;
  EXPECT_TRUE(m.find("no CUDA device") != std::string::npos || m.find("no CUDA backend") != std::string::npos) << m;
  EXPECT_NE(m.find("use --backend host"), std::string::npos) << m;
}

TEST(BufferBackend, WithGpuCudaIsIpcOnOneNodeAndStagedOtherwise) {
  if (!gpu_here()) GTEST_SKIP() << "no GPU here";
  EXPECT_EQ(choose_backend("cuda", false, 0, 1), Backend::kCudaIpc);
  EXPECT_EQ(choose_backend("auto", false, 0, 1), Backend::kCudaIpc);
  EXPECT_EQ(choose_backend("cuda", true, 0, 1), Backend::kCudaStaged);
  EXPECT_EQ(choose_backend("cuda", false, 0, 2), Backend::kCudaStaged);
}

TEST(BufferBackend, Names) {
  EXPECT_STREQ(to_string(Backend::kHost), "host/ucx");
  EXPECT_STREQ(to_string(Backend::kCudaIpc), "cuda/ipc");
  EXPECT_STREQ(to_string(Backend::kCudaStaged), "cuda/staged-ucx");
  EXPECT_FALSE(on_device(Backend::kHost));
  EXPECT_TRUE(on_device(Backend::kCudaIpc) && on_device(Backend::kCudaStaged));
}
