#pragma once
// A node of a node-link test that runs in a process of its own, so that the test can stop it
// (SIGSTOP) as a node off the network.
//
// It is forked at construction, and a test must construct it before it starts any thread
// (a node link starts its writer's). After a fork only the forking thread goes on, and a lock
// another thread held stays held in the child: gcc 12's AddressSanitizer has no fork handler
// for its allocator, and a child forked beside running writer threads hung in malloc as its own
// writer started (NodeLinkTree.AParentThatLeavesHandsItsChildrenToTheRoot, 9 of 30 runs under
// ASan). So the child waits for what it needs to know (ports) until the parent sends it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <vector>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun::test_support {

class ForkedNode {
 public:
  // `body` runs in the child, which then exits; it talks to the parent with tell() and
  // wait_words().
  explicit ForkedNode(const std::function<void(ForkedNode&)>& body) {
    // The rule above, checked: a test that breaks it fails every time, not one run in three.
    const auto threads = std::distance(std::filesystem::directory_iterator("/proc/self/task"), {});
    if (threads != 1) throw std::logic_error("a ForkedNode was made while this process runs other threads");
    int up[2], down[2];
    if (::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(down, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    child_ = pid_ == 0;
    ours_up_ = UniqueFd(child_ ? up[1] : up[0]);
    ours_down_ = UniqueFd(child_ ? down[0] : down[1]);
    UniqueFd(child_ ? up[0] : up[1]).reset();
    UniqueFd(child_ ? down[1] : down[0]).reset();
    if (child_) {
      body(*this);
      ::_exit(0);
    }
  }
  ForkedNode(const ForkedNode&) = delete;
  ForkedNode& operator=(const ForkedNode&) = delete;
  ~ForkedNode() {
    if (child_ || pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  pid_t pid() const { return pid_; }

  // Child to parent: one number (a port). The parent's heard() takes it (-1: the child ended).
  void tell(int word) { (void)!::write(ours_up_.get(), &word, sizeof word); }
  int heard() {
    int word = -1;
    return ::read(ours_up_.get(), &word, sizeof word) == sizeof word ? word : -1;
  }
  // Parent to child: a list of numbers, taken whole by the child's wait_words().
  void send_words(const std::vector<int>& words) {
    const int count = static_cast<int>(words.size());
    (void)!::write(ours_down_.get(), &count, sizeof count);
    if (count > 0) (void)!::write(ours_down_.get(), words.data(), words.size() * sizeof(int));
  }
  // Child: whether words from the parent wait to be taken (wait_words() then does not block).
  bool words_ready() const {
    pollfd p{ours_down_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  std::vector<int> wait_words() {
    int count = 0;
    if (::read(ours_down_.get(), &count, sizeof count) != sizeof count || count < 0) ::_exit(3);
    std::vector<int> words(static_cast<std::size_t>(count));
    if (count > 0 && ::read(ours_down_.get(), words.data(), words.size() * sizeof(int)) !=
                         static_cast<ssize_t>(words.size() * sizeof(int)))
      ::_exit(3);
    return words;
  }

 private:
  pid_t pid_ = -1;
  bool child_ = false;
  UniqueFd ours_up_, ours_down_;
};

}  // namespace hyrun::test_support
