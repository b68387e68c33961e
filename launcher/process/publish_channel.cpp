#include "hyrun/process/publish_channel.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>

#include "hyrun/common/env_contract.hpp"
#include "hyrun/common/error.hpp"

namespace hyrun {

UniqueFd PublishChannel::open() {
  Pipe pipe = make_pipe();
  set_nonblocking(pipe.read.get());
  read_ = std::move(pipe.read);
  buffer_.clear();
  address_.reset();
  said_hello_ = closed_early_ = false;
  return std::move(pipe.write);
}

void PublishChannel::on_readable() {
  char chunk[4096];
  while (read_) {
    const ssize_t n = ::read(read_.get(), chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      // Lines in order: the library's hello (at load), then the address.
      for (auto newline = buffer_.find('\n'); newline != std::string::npos; newline = buffer_.find('\n')) {
        const std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (is_hello_line(line)) {
          if (!said_hello_) spdlog::debug("rank 0 uses the hyrun worker library (said hello)");
          said_hello_ = true;
          continue;
        }
        const auto address = parse_publish_line(line);
        read_.reset();
        if (!address)
          throw Error(fmt::format("rank 0 wrote something other than its address on {} (fd {}): '{:.60}'",
                                  env::kPublishFd, kChildFd, line),
                      exit_code::kLauncherError);
        address_ = *address;
        spdlog::debug("rank 0 published its UCX worker address {}", *address_);
        return;
      }
      if (buffer_.size() > 65536) {
        read_.reset();
        throw Error(fmt::format("rank 0 wrote over 64 KiB on {} without a newline", env::kPublishFd),
                    exit_code::kLauncherError);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    read_.reset();  // EOF: rank 0 closed the fd (or exited) without publishing
    closed_early_ = true;
  }
}

}  // namespace hyrun
