// Small POSIX file helpers for files geops must not lose or leave half
// written (store markers, keys and certificates): errors name the file and
// the system's reason.
//
// Thread-safety: stateless functions; safe from any thread.
#ifndef GEOPS_COMMON_FILE_IO_H_
#define GEOPS_COMMON_FILE_IO_H_

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace geops {

// Unavailable("<what>: <strerror(errno)>"), for the call that just failed.
Status ErrnoError(const std::string& what);

// Writes all of `content` to `fd` (retrying short writes and EINTR), then
// fsyncs it. Does not close `fd`. Errors name `path`.
Status WriteAllSynced(int fd, std::string_view content, const std::filesystem::path& path);

// Makes a directory's entries (a new file, a rename) durable.
Status SyncDirectory(const std::filesystem::path& dir);

}  // namespace geops

#endif  // GEOPS_COMMON_FILE_IO_H_
