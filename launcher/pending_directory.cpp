#include "hyrun/launcher/pending_directory.hpp"

#include "hyrun/common/pending_environment.hpp"
#include "hyrun/common/whole_file.hpp"

namespace hyrun {

PendingDirectory PendingDirectory::create() {
  return PendingDirectory(PrivateDirectory::create(PrivateDirectory::temporary_root(), "hyrun-pending"));
}

void PendingDirectory::put(int rank, const std::vector<std::string>& entries) const {
  put_whole_file(path(), pending_environment_file(rank), format_pending_environment(entries));
}

}  // namespace hyrun
