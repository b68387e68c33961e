// A job's private directory: only this user can enter it, and it goes with everything in it.
#include "hyrun/process/private_directory.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hyrun/common/error.hpp"
#include "hyrun/common/process_identity.hpp"

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

// A parent folder of the test's own, so that other tests' directories are never judged.
class AbandonedDirectories : public ::testing::Test {
 protected:
  void SetUp() override { parent_ = PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-test-parent"); }
  const std::string& parent() const { return parent_.path(); }

  // A directory made by a child process that then ends without unwinding (as under
  // SIGKILL: nothing removes it). With `hold`, the child stays alive until the pipe closes.
  std::string made_by_a_child(int* holder_pid = nullptr, int* release_fd = nullptr) {
    int path_pipe[2], hold_pipe[2];
    EXPECT_EQ(::pipe(path_pipe), 0);
    EXPECT_EQ(::pipe(hold_pipe), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(hold_pipe[1]);
      const PrivateDirectory dir = PrivateDirectory::create(parent(), "hyrun-job");  // _exit: never destroyed
      (void)!::write(path_pipe[1], dir.path().data(), dir.path().size());
      ::close(path_pipe[1]);
      char c;
      if (holder_pid != nullptr) (void)!::read(hold_pipe[0], &c, 1);
      ::_exit(0);
    }
    ::close(path_pipe[1]);
    ::close(hold_pipe[0]);
    std::string path(4096, '\0');
    const ssize_t n = ::read(path_pipe[0], path.data(), path.size());
    ::close(path_pipe[0]);
    path.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (holder_pid != nullptr) {
      *holder_pid = child;
      *release_fd = hold_pipe[1];
    } else {
      ::close(hold_pipe[1]);
      int status = 0;
      ::waitpid(child, &status, 0);
    }
    return path;
  }

 private:
  PrivateDirectory parent_;
};

TEST_F(AbandonedDirectories, AKilledOwnersDirectoryIsRemovedByTheNextOfItsPrefix) {
  const std::string left = made_by_a_child();
  ASSERT_FALSE(left.empty());
  ASSERT_TRUE(std::filesystem::exists(left + "/" + PrivateDirectory::kOwnerFile));
  std::ofstream(left + "/segment") << "a killed job's shared memory";
  {
    PrivateDirectory other = PrivateDirectory::create(parent(), "hyrun-other");
    EXPECT_TRUE(std::filesystem::exists(left)) << "another prefix's directory was judged";
  }
  PrivateDirectory next = PrivateDirectory::create(parent(), "hyrun-job");
  EXPECT_FALSE(std::filesystem::exists(left));
  EXPECT_TRUE(std::filesystem::exists(next.path()));
}

TEST_F(AbandonedDirectories, ALiveOwnersDirectoryIsKept) {
  PrivateDirectory mine = PrivateDirectory::create(parent(), "hyrun-job");
  int holder = 0, release = -1;
  const std::string held = made_by_a_child(&holder, &release);
  ASSERT_FALSE(held.empty());
  {
    PrivateDirectory next = PrivateDirectory::create(parent(), "hyrun-job");
    EXPECT_TRUE(std::filesystem::exists(mine.path()));
    EXPECT_TRUE(std::filesystem::exists(held)) << "a live process's directory was removed";
  }
  ::close(release);
  int status = 0;
  ::waitpid(holder, &status, 0);
  PrivateDirectory after = PrivateDirectory::create(parent(), "hyrun-job");
  EXPECT_FALSE(std::filesystem::exists(held)) << "its owner has ended now";
  EXPECT_TRUE(std::filesystem::exists(mine.path()));
}

TEST_F(AbandonedDirectories, WhatCannotBeJudgedIsKept) {
  const std::string left = made_by_a_child();
  ASSERT_FALSE(left.empty());
  // No owner file (an older hyrun, or one that is making its directory right now).
  const std::string unnamed = parent() + "/hyrun-job-unname";
  std::filesystem::create_directory(unnamed);
  // Another host's, on a filesystem both share: its pid means nothing here.
  const std::string remote = parent() + "/hyrun-job-remote";
  std::filesystem::create_directory(remote);
  ProcessIdentity elsewhere = ProcessIdentity::own();
  elsewhere.boot_id[0] = static_cast<std::byte>(~static_cast<unsigned>(elsewhere.boot_id[0]));
  elsewhere.pid = 999999;  // no such process here
  const auto bytes = elsewhere.encode();
  std::ofstream(remote + "/" + PrivateDirectory::kOwnerFile, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  // A link with the prefix's name to a dead owner's directory: neither is followed.
  const std::string link = parent() + "/hyrun-job-linked";
  std::filesystem::create_directory_symlink(left, link);
  // A dead owner's directory under a longer name is not of this prefix.
  const std::string longer = parent() + "/hyrun-job-abcdefg";
  std::filesystem::rename(left, longer);

  PrivateDirectory next = PrivateDirectory::create(parent(), "hyrun-job");
  EXPECT_TRUE(std::filesystem::exists(unnamed));
  EXPECT_TRUE(std::filesystem::exists(remote));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_TRUE(std::filesystem::exists(longer + "/" + PrivateDirectory::kOwnerFile));
}

TEST(ProcessIdentityOwn, AForkedChildIsItself) {
  const ProcessIdentity parent = ProcessIdentity::own();
  ASSERT_TRUE(parent.known());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const ProcessIdentity mine = ProcessIdentity::own();
    const uint32_t pid = mine.pid;
    (void)!::write(fds[1], &pid, sizeof pid);
    ::_exit(0);
  }
  ::close(fds[1]);
  uint32_t seen = 0;
  EXPECT_EQ(::read(fds[0], &seen, sizeof seen), static_cast<ssize_t>(sizeof seen));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(seen, static_cast<uint32_t>(child));
}

}  // namespace
}  // namespace hyrun
