#pragma once
// A directory only this user can enter (mkdtemp: mode 0700), made for one job's files (a
// PMIx server's rendezvous sockets, an MPI library's shared-memory segments, an MPS daemon's
// pipes) and removed with everything in it when its owner ends, on every path that unwinds.
// What a killed process left there goes with it.
//
// They live in one directory of the user's under the parent, `<parent>/hyrun-<uid>` (mode
// 0700; kept, as tmux keeps /tmp/tmux-<uid>), so that finding what a killed hyrun left reads
// that directory, never the whole parent: /tmp may hold 10^5 entries.
#include <string>

namespace hyrun {

class PrivateDirectory {
 public:
  /// Creates `<parent>/hyrun-<uid>/<prefix>-XXXXXX` and names this process as its owner in it
  /// (kOwnerFile). First removes the `<prefix>-XXXXXX` directories there whose owner was a
  /// process of this host (same boot, same PID namespace) that has ended; a directory of a live
  /// process, of another host sharing `parent`, or without an owner file is kept. The launch
  /// that makes `hyrun-<uid>` also removes such directories (any prefix `hyrun-*`) that an
  /// earlier hyrun left in `parent` itself. Where `hyrun-<uid>` cannot be used (another user's,
  /// writable by others, not a directory: logged as a warning), creates `<parent>/<prefix>-XXXXXX`
  /// after the same removal in `parent`. Throws SystemError naming the template on failure.
  static PrivateDirectory create(const std::string& parent, const std::string& prefix);
  /// The name of the user's directory under a parent, before the uid.
  static constexpr const char* kHomePrefix = "hyrun-";
  /// The file in each directory that names its owner (ProcessIdentity::encode()).
  static constexpr const char* kOwnerFile = ".hyrun-owner";
  /// $TMPDIR, or /tmp when it is unset or empty.
  static std::string temporary_root();

  PrivateDirectory() = default;
  ~PrivateDirectory();  ///< removes the tree; never throws (a failure is logged)
  PrivateDirectory(PrivateDirectory&& other) noexcept;
  PrivateDirectory& operator=(PrivateDirectory&& other) noexcept;
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  const std::string& path() const { return path_; }
  /// Removes the tree now (a process that ends without destructors: a PMIx abort); then
  /// owns nothing. Never throws (a failure is logged).
  void remove() noexcept;

 private:
  explicit PrivateDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;  // empty: owns nothing
};

}  // namespace hyrun
