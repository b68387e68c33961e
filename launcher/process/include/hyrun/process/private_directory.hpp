#pragma once
// A directory only this user can enter (mkdtemp: mode 0700), made for one job's files (a
// PMIx server's rendezvous sockets, an MPI library's shared-memory segments, an MPS daemon's
// pipes) and removed with everything in it when its owner ends, on every path that unwinds.
// What a killed process left there goes with it.
#include <string>

namespace hyrun {

class PrivateDirectory {
 public:
  /// Creates `<parent>/<prefix>-XXXXXX` and names this process as its owner in it (kOwnerFile).
  /// First removes the `<prefix>-XXXXXX` directories of this user under `parent` whose owner
  /// was a process of this host (same boot, same PID namespace) that has ended; a directory of
  /// a live process, of another host sharing `parent`, or without an owner file is kept.
  /// Throws SystemError naming the template on failure.
  static PrivateDirectory create(const std::string& parent, const std::string& prefix);
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
