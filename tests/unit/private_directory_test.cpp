// A job's private directory: only this user can enter it, and it goes with everything in it.
#include "hyrun/process/private_directory.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

TEST(PrivateDirectory, IsThisUsersAloneAndGoesWithItsContents) {
  std::string path;
  {
    PrivateDirectory dir = PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-test");
    path = dir.path();
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::filesystem::create_directories(path + "/a/b");
    std::ofstream(path + "/a/b/segment") << "left by a killed rank";
    PrivateDirectory moved = std::move(dir);
    EXPECT_TRUE(dir.path().empty());
    EXPECT_EQ(moved.path(), path);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(PrivateDirectory, ANamedParentThatIsMissingIsAnError) {
  try {
    PrivateDirectory::create("/nonexistent-hyrun-parent", "x");
    FAIL() << "no error";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-hyrun-parent/x-XXXXXX"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hyrun
