#pragma once
// Owns one file descriptor; closes it exactly once.
#include <utility>

namespace hyrun {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

/// pipe2 with O_CLOEXEC (plus `extra_flags`, e.g. O_NONBLOCK on both ends); throws SystemError.
Pipe make_pipe(int extra_flags = 0);

/// Sets O_NONBLOCK on `fd`; throws SystemError.
void set_nonblocking(int fd);

}  // namespace hyrun
