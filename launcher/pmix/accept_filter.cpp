// The door of hyrun's PMIx server. libpmix 4 listens on loopback TCP, where every user of
// the host can connect, and runs each handshake on its one progress thread with blocking
// reads: a connection of another user that sends half a header stalls every client of the
// job, and one refused for its credentials leaves libpmix 4.2.2 deadlocked (both measured;
// docs/pmix.md). libpmix 4.2.2 never calls the server module's `listener` upcall for its TCP
// listener, so hyrun cannot take the socket over; instead this definition of accept(2)
// interposes the C library's for libpmix (the only user of accept in hyrun: hyrun's own
// code uses accept4), and closes at once every connection whose peer socket is not this
// user's (socket_owner.hpp) or is not held by a process of the job (socket_holder.hpp: a
// handshake that fails half-way leaves libpmix 4.2.2 broken), rate-limited in the log. The listener is non-blocking, so
// a refused connection ends in EAGAIN, which libpmix's listener takes as "no more for now".
// Each admitted one is recorded with the child of hyrun's it came from (admitted_connections.hpp).
#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "hyrun/common/warning_limiter.hpp"
#include "hyrun/pmix/admitted_connections.hpp"
#include "hyrun/pmix/socket_holder.hpp"
#include "hyrun/pmix/socket_owner.hpp"

namespace {

using AcceptFn = int (*)(int, sockaddr*, socklen_t*);

AcceptFn next_accept() {
  static const auto next = reinterpret_cast<AcceptFn>(::dlsym(RTLD_NEXT, "accept"));
  return next;
}

void say_refused(const std::string& why) {
  static std::mutex mutex;
  static hyrun::WarningLimiter refusals("refused connections to the job's PMIx server");
  std::lock_guard lock(mutex);
  refusals.warn(fmt::format("refused a connection to the job's PMIx server from {}", why));
}

// Whose the peer of `fd` is, when it is one of the job's processes: the child of hyrun's it
// is under (none known without the kernel's children lists); otherwise why it is not.
std::variant<std::optional<pid_t>, std::string> peer_in_job(int fd) {
  const auto peer = hyrun::pmix::local_peer(fd);
  if (!peer) return "a socket of no local user (its owner closed it before it was taken, or it is not of this host)";
  if (peer->uid != ::getuid()) return fmt::format("uid {}", peer->uid);
  const auto holder = hyrun::pmix::find_holder(peer->inode, hyrun::pmix::children_admitted());
  spdlog::debug("PMIx door: a connection's holder found after looking at {} processes", holder.looked_at);
  // Unknown (a kernel without children lists): the owner's rule alone, as before.
  if (holder.known && !holder.child)
    return "a process of this user that is not one of the job's (none of hyrun's descendants holds its socket)";
  return holder.child;
}

}  // namespace

extern "C" int accept(int listening_fd, sockaddr* address, socklen_t* length) {
  const AcceptFn next = next_accept();
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  for (;;) {
    const int fd = next(listening_fd, address, length);
    if (fd < 0) return fd;
    const auto peer = peer_in_job(fd);
    if (const auto* child = std::get_if<std::optional<pid_t>>(&peer)) {
      hyrun::pmix::remember_admitted(fd, *child);
      return fd;
    }
    ::close(fd);
    say_refused(std::get<std::string>(peer));
  }
}
