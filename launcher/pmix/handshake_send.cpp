// send(2) for libpmix's handshake. libpmix 4.2.2 answers a client's connect-ack with blocking
// sends (pmix_ptl_base_send_blocking, the only caller of send in libpmix: its other writes
// use writev). When the client is gone before those answers are written (a rank killed
// during PMIx_Init), the send fails, and the handler's error path releases the rank's record
// twice (ptl_base_connection_hdlr.c): the record stays listed, freed, and that rank's next
// connection never completes. So for a connection hyrun's accept admitted, a send that fails
// because the peer went away reports the bytes as sent: libpmix then finishes the handshake,
// finds the connection closed on its first read, and takes its ordinary path for a client
// that died (the same as for one that dies a moment later). Every other send is the C
// library's, untouched.
#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>

#include "hyrun/pmix/admitted_connections.hpp"

namespace {

using SendFn = ssize_t (*)(int, const void*, size_t, int);

SendFn next_send() {
  static const auto next = reinterpret_cast<SendFn>(::dlsym(RTLD_NEXT, "send"));
  return next;
}

}  // namespace

extern "C" ssize_t send(int fd, const void* data, size_t length, int flags) {
  const SendFn next = next_send();
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const ssize_t sent = next(fd, data, length, flags);
  if (sent >= 0 || (errno != EPIPE && errno != ECONNRESET)) return sent;
  const int error = errno;
  if (!hyrun::pmix::is_admitted(fd)) {
    errno = error;
    return sent;
  }
  spdlog::debug(
      "a client of the job's PMIx server went away during its handshake (socket {}); its loss is "
      "taken as any client's",
      fd);
  return static_cast<ssize_t>(length);
}
