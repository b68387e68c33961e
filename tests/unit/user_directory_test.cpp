// The one rule for a directory whose names no other user may change, and the opening of one.
#include "hyrun/common/user_directory.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hyrun/common/error.hpp"

namespace hyrun {
namespace {

struct stat directory(uid_t owner, mode_t mode) {
  struct stat st {};
  st.st_mode = S_IFDIR | mode;
  st.st_uid = owner;
  return st;
}

TEST(OthersCanChange, EveryModeBitThatLetsOthersWriteIsRefusedUnlessStickyIsEnough) {
  const uid_t me = 1000;
  for (mode_t mode = 0; mode <= 07777; ++mode) {
    const bool others_write = (mode & 022) != 0, sticky = (mode & S_ISVTX) != 0;
    const auto strict = others_can_change(directory(me, mode), me);
    const auto lenient = others_can_change(directory(me, mode), me, StickyBit::kEnough);
    EXPECT_EQ(strict.has_value(), others_write) << std::oct << mode;
    EXPECT_EQ(lenient.has_value(), others_write && !sticky) << std::oct << mode;
    if (strict) {
      EXPECT_EQ(strict->reason, NotOnlyOurs::Reason::kOthersWrite);
      EXPECT_NE(strict->what.find(fmt::format("(mode {:04o})", mode)), std::string::npos) << strict->what;
    }
  }
  EXPECT_EQ(others_can_change(directory(me, 0770), me)->what, "its group can write in it (mode 0770)");
  EXPECT_EQ(others_can_change(directory(me, 0707), me)->what, "all users can write in it (mode 0707)");
  EXPECT_EQ(others_can_change(directory(me, 0777), me, StickyBit::kEnough)->what,
            "its group and all users can write in it (mode 0777) and it has no sticky bit");
}

TEST(OthersCanChange, AnotherOwnerOrANonDirectoryIsRefusedWhateverTheMode) {
  for (const mode_t mode : {0700, 0755, 01777}) {
    const auto other = others_can_change(directory(0, mode), 1000, StickyBit::kEnough);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->reason, NotOnlyOurs::Reason::kOtherOwner);
    EXPECT_EQ(other->what, "it is owned by uid 0, not by you (uid 1000)");
    struct stat file = directory(1000, mode);
    file.st_mode = S_IFREG | mode;
    EXPECT_EQ(others_can_change(file, 1000)->reason, NotOnlyOurs::Reason::kNotADirectory);
  }
}

class OpenUserDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = std::filesystem::temp_directory_path() / "hyrun-user-directory-test-XXXXXX";
    ASSERT_NE(::mkdtemp(name.data()), nullptr);
    base_ = name;
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::string error_of(const std::string& path) {
    try {
      open_user_directory(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string base_;
};

TEST_F(OpenUserDirectory, MakesAMissingOne0700AndTellsItMadeIt) {
  const std::string path = base_ + "/mine";
  const mode_t old = ::umask(0);
  const UserDirectory made = open_user_directory(path);
  ::umask(old);
  EXPECT_TRUE(made.fd);
  EXPECT_TRUE(made.created);
  struct stat st {};
  ASSERT_EQ(::fstat(made.fd.get(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  const UserDirectory again = open_user_directory(path);
  EXPECT_TRUE(again.fd);
  EXPECT_FALSE(again.created);
}

TEST_F(OpenUserDirectory, RefusesWhatOthersCouldChangeNamingThePath) {
  std::filesystem::create_directory(base_ + "/open");
  ASSERT_EQ(::chmod((base_ + "/open").c_str(), 01777), 0);
  EXPECT_EQ(error_of(base_ + "/open"), base_ + "/open: its group and all users can write in it (mode 1777)");
  std::filesystem::create_directory(base_ + "/real");
  std::filesystem::create_directory_symlink(base_ + "/real", base_ + "/link");
  EXPECT_EQ(error_of(base_ + "/link"), base_ + "/link: it is a symbolic link, not a directory");
  std::ofstream(base_ + "/file") << "x";
  EXPECT_EQ(error_of(base_ + "/file"), base_ + "/file: it is not a directory");
  EXPECT_NE(error_of(base_ + "/missing/below").find(base_ + "/missing/below: cannot create it"), std::string::npos);
  if (::geteuid() == 0) {
    std::filesystem::create_directory(base_ + "/theirs");
    ASSERT_EQ(::chown((base_ + "/theirs").c_str(), 65534, 65534), 0);
    EXPECT_EQ(error_of(base_ + "/theirs"), base_ + "/theirs: it is owned by uid 65534, not by you (uid 0)");
  }
}

}  // namespace
}  // namespace hyrun
