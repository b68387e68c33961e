// A job's private directory: only this user can enter it, and it goes with everything in it.
#include "hyrun/process/private_directory.hpp"

#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "captured_log.hpp"
#include "hyrun/common/error.hpp"
#include "hyrun/common/process_identity.hpp"

namespace hyrun {
namespace {

std::string home_under(const std::string& parent) { return parent + "/hyrun-" + std::to_string(::geteuid()); }

TEST(PrivateDirectory, IsThisUsersAloneAndGoesWithItsContents) {
  std::string path;
  {
    PrivateDirectory dir = PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-test");
    path = dir.path();
    const std::string home = home_under(PrivateDirectory::temporary_root());
    EXPECT_EQ(std::filesystem::path(path).parent_path(), home);
    struct stat st {};
    ASSERT_EQ(::lstat(home.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(st.st_mode & 0022, 0u);
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

// The owner file goes last (seen with inotify: the last entry deleted before the directory
// itself), so that a removal cut short leaves a directory that the next hyrun can judge.
// The owner file is made the newest entry here: on tmpfs, where readdir gives the newest
// first, a plain remove_all took it first.
TEST(PrivateDirectory, ItsOwnerFileIsRemovedLast) {
  const std::string parent =
      std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : PrivateDirectory::temporary_root();
  PrivateDirectory dir = PrivateDirectory::create(parent, "hyrun-test");
  const std::string path = dir.path(), owner = path + "/" + PrivateDirectory::kOwnerFile;
  for (int i = 0; i < 20; ++i) std::ofstream(path + "/segment." + std::to_string(i)) << i;
  std::filesystem::create_directories(path + "/a/b");
  std::ofstream(path + "/a/b/c") << "deeper";
  const std::string identity = [&] {
    std::ifstream in(owner, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  ASSERT_FALSE(identity.empty());
  std::filesystem::remove(owner);
  std::ofstream(owner, std::ios::binary) << identity;  // the newest entry now
  const int watch_fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(watch_fd, 0);
  ASSERT_GE(::inotify_add_watch(watch_fd, path.c_str(), IN_DELETE | IN_DELETE_SELF), 0);
  dir.remove();
  EXPECT_FALSE(std::filesystem::exists(path));
  std::vector<std::string> deleted;
  alignas(inotify_event) char buffer[1 << 16];
  for (ssize_t n; (n = ::read(watch_fd, buffer, sizeof buffer)) > 0;)
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if ((event->mask & IN_DELETE) && event->len > 0) deleted.emplace_back(event->name);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  ::close(watch_fd);
  ASSERT_EQ(deleted.size(), 22u);  // 20 segments, a/, the owner file
  EXPECT_EQ(deleted.back(), PrivateDirectory::kOwnerFile);
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
  std::string home() const { return home_under(parent()); }
  // An abandoned directory as a hyrun before the home left it: in the parent itself.
  std::string left_in_the_parent() {
    const std::string left = made_by_a_child();
    const std::string moved = parent() + "/" + std::filesystem::path(left).filename().string();
    std::filesystem::rename(left, moved);
    return moved;
  }

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
  const std::string unnamed = home() + "/hyrun-job-unname";
  std::filesystem::create_directory(unnamed);
  // Another host's, on a filesystem both share: its pid means nothing here.
  const std::string remote = home() + "/hyrun-job-remote";
  std::filesystem::create_directory(remote);
  ProcessIdentity elsewhere = ProcessIdentity::own();
  elsewhere.boot_id[0] = static_cast<std::byte>(~static_cast<unsigned>(elsewhere.boot_id[0]));
  elsewhere.pid = 999999;  // no such process here
  const auto bytes = elsewhere.encode();
  std::ofstream(remote + "/" + PrivateDirectory::kOwnerFile, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  // A link with the prefix's name to a dead owner's directory: neither is followed.
  const std::string link = home() + "/hyrun-job-linked";
  std::filesystem::create_directory_symlink(left, link);
  // A dead owner's directory under a longer name is not of this prefix.
  const std::string longer = home() + "/hyrun-job-abcdefg";
  std::filesystem::rename(left, longer);

  PrivateDirectory next = PrivateDirectory::create(parent(), "hyrun-job");
  EXPECT_TRUE(std::filesystem::exists(unnamed));
  EXPECT_TRUE(std::filesystem::exists(remote));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_TRUE(std::filesystem::exists(longer + "/" + PrivateDirectory::kOwnerFile));
}

TEST_F(AbandonedDirectories, AKilledOwnersDirectoryIsFoundWithoutReadingTheParent) {
  // Made the home; the same abandoned directory in the parent itself is not looked for there.
  const std::string in_parent = left_in_the_parent();
  const std::string in_home = made_by_a_child();
  ASSERT_EQ(std::filesystem::path(in_home).parent_path(), home());
  PrivateDirectory next = PrivateDirectory::create(parent(), "hyrun-job");
  EXPECT_FALSE(std::filesystem::exists(in_home));
  EXPECT_TRUE(std::filesystem::exists(in_parent + "/" + PrivateDirectory::kOwnerFile)) << "the parent was read";
}

TEST_F(AbandonedDirectories, TheLaunchThatMakesTheHomeReclaimsWhatEarlierOnesLeftInTheParent) {
  const std::string job = left_in_the_parent();
  PrivateDirectory other_prefix = PrivateDirectory::create(parent(), "hyrun-x");  // made the home
  const std::string pmix = left_in_the_parent();
  // As an earlier hyrun left them: no home yet.
  std::filesystem::rename(pmix, parent() + "/hyrun-pmix-" + pmix.substr(pmix.size() - 6));
  other_prefix.remove();
  ASSERT_TRUE(std::filesystem::remove(home()));
  const std::string unnamed = parent() + "/hyrun-job-unname";  // kept: no owner to judge
  std::filesystem::create_directory(unnamed);
  PrivateDirectory first = PrivateDirectory::create(parent(), "hyrun-job");
  EXPECT_EQ(std::filesystem::path(first.path()).parent_path(), home());
  EXPECT_FALSE(std::filesystem::exists(job));
  EXPECT_FALSE(std::filesystem::exists(parent() + "/hyrun-pmix-" + pmix.substr(pmix.size() - 6)))
      << "another prefix of hyrun's was kept";
  EXPECT_TRUE(std::filesystem::exists(unnamed));
}

// A home anyone could have made first (theirs to fill or to empty) is never used; the parent
// is then read as before the home.
TEST_F(AbandonedDirectories, AHomeOthersCanChangeIsNotUsed) {
  std::vector<std::function<void()>> spoil = {
      [&] { ASSERT_EQ(::chmod(home().c_str(), 0777), 0); },
      [&] { ASSERT_EQ(::chmod(home().c_str(), 0730), 0); },
      [&] {
        std::filesystem::remove(home());
        std::filesystem::create_directory(parent() + "/elsewhere");
        std::filesystem::create_directory_symlink(parent() + "/elsewhere", home());
      },
      [&] {
        std::filesystem::remove(home());
        std::ofstream(home()) << "a file";
      },
  };
  if (::geteuid() == 0) spoil.push_back([&] { ASSERT_EQ(::chown(home().c_str(), 65534, 65534), 0); });
  for (std::size_t i = 0; i < spoil.size(); ++i) {
    std::filesystem::remove_all(home());
    std::filesystem::create_directory(home());
    ::chmod(home().c_str(), 0700);
    spoil[i]();
    const std::string left = left_in_the_parent();
    test_support::CapturedLog log;
    PrivateDirectory dir = PrivateDirectory::create(parent(), "hyrun-job");
    EXPECT_EQ(std::filesystem::path(dir.path()).parent_path(), parent()) << "case " << i;
    const auto messages = log.messages();
    ASSERT_EQ(log.warnings(), 1) << "case " << i;
    EXPECT_TRUE(messages[0].starts_with(home() + ": ")) << messages[0];
    EXPECT_NE(messages[0].find("made in " + parent() + " itself"), std::string::npos) << messages[0];
    EXPECT_FALSE(std::filesystem::exists(left)) << "case " << i << ": the parent was not read";
    if (std::filesystem::is_symlink(home())) {
      EXPECT_TRUE(std::filesystem::is_empty(parent() + "/elsewhere")) << "the link was followed";
    }
    std::filesystem::remove_all(home());
  }
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
