#include "common/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace geops {

Status ErrnoError(const std::string& what) { return UnavailableError(what + ": " + std::strerror(errno)); }

Status WriteAllSynced(int fd, std::string_view content, const std::filesystem::path& path) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("cannot write " + path.string());
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return ErrnoError("cannot sync " + path.string());
  return Status::Ok();
}

Status SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open " + dir.string() + " to sync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoError("cannot sync " + dir.string());
  return Status::Ok();
}

}  // namespace geops
