#pragma once
// The worker library's first word to hyrun: "hyrun-hello v1" on rank 0's publish fd, written
// when the library is loaded (and again harmlessly skipped when a World starts), so that
// hyrun can tell within seconds a rank 0 that will never publish (a program without the
// library, started without --bootstrap=none) from one that is still starting.

namespace hyrun::detail {

/// Writes the hello line once per process on HYRUN_PUBLISH_FD when that fd is a pipe.
/// Never throws: a failure only costs hyrun's early hint.
void say_hello_to_launcher() noexcept;

}  // namespace hyrun::detail
