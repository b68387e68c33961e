#pragma once
// A fixture node's device state: /proc/driver/nvidia/gpus/<bus>/information files and
// /dev/nvidiaN nodes (plain files: openable; absent: the device cgroup denies them) in a
// temporary directory, removed with the object.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "hyrun/binding/gpu_visibility.hpp"

namespace hyrun::binding::test {

class DeviceFixture {
 public:
  /// `minor_to_bus`: every GPU the driver reports; `openable`: the minors the task may open.
  DeviceFixture(const std::map<int, std::string>& minor_to_bus, const std::set<int>& openable) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hyrun-devices.XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    std::filesystem::create_directories(root_ / "dev");
    for (const auto& [minor, bus] : minor_to_bus) {
      const auto dir = root_ / "proc/driver/nvidia/gpus" / bus;
      std::filesystem::create_directories(dir);
      std::ofstream(dir / "information") << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 100\n"
                                         << "Bus Location: \t " << bus << "\nDevice Minor: \t " << minor
                                         << "\nGPU Excluded:\t No\n";
      if (openable.count(minor)) std::ofstream(root_ / "dev" / ("nvidia" + std::to_string(minor))) << "";
    }
  }
  ~DeviceFixture() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  DeviceFixture(const DeviceFixture&) = delete;
  DeviceFixture& operator=(const DeviceFixture&) = delete;

  SystemRoots roots() const { return SystemRoots{(root_ / "dev").string(), (root_ / "proc").string()}; }

 private:
  std::filesystem::path root_;
};

}  // namespace hyrun::binding::test
