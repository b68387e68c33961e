// The warning before ranks share a GPU without an MPS daemon (launcher/mps_check.hpp).
#include "hyrun/launcher/mps_check.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace {

using hyrun::binding::RankPlacement;

RankPlacement on_gpu(int local_rank, const std::string& bus) {
  RankPlacement p;
  p.local_rank = local_rank;
  hyrun::binding::GpuAssignment g;
  g.pci_bus_id = bus;
  p.gpus.push_back(g);
  return p;
}

class MpsCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hyrun-mps-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(MpsCheck, SharedGpuWithoutDaemonNamesTheRanksTheGpuAndTheFix) {
  const auto w = hyrun::shared_gpu_without_mps({on_gpu(0, "0000:00:06.0"), on_gpu(1, "0000:00:06.0")}, 4, dir_);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("ranks 4,5 share the GPU at 0000:00:06.0"), std::string::npos) << *w;
  EXPECT_NE(w->find((dir_ / "control").string()), std::string::npos) << *w;
  EXPECT_NE(w->find("nvidia-cuda-mps-control -d"), std::string::npos) << *w;
}

TEST_F(MpsCheck, NoWarningWhenTheDaemonsPipeExists) {
  std::ofstream(dir_ / "control") << "";
  EXPECT_FALSE(hyrun::shared_gpu_without_mps({on_gpu(0, "0000:00:06.0"), on_gpu(1, "0000:00:06.0")}, 0, dir_));
}

TEST_F(MpsCheck, NoWarningWhenEveryRankHasItsOwnGpuOrNone) {
  EXPECT_FALSE(hyrun::shared_gpu_without_mps({on_gpu(0, "0000:18:00.0"), on_gpu(1, "0000:2a:00.0")}, 0, dir_));
  EXPECT_FALSE(hyrun::shared_gpu_without_mps({RankPlacement{}, RankPlacement{}}, 0, dir_));
}

}  // namespace
