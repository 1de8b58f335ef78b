// SPDX-License-Identifier: Apache-2.0
// mapped_file.h - whole files in and out: shared read-only bytes (memory-mapped where possible), atomic writes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ir/stored_tensor.h"
#include "ternjit/result.h"

namespace ternjit::formats {

/// The bytes of the regular file at `path`. A non-empty file is mapped read-only
/// (a private mapping: pages are read on first touch and shared with the page cache);
/// an empty file, or one on a file system without mmap, is read into memory. Anything
/// that is not a regular file (a directory, a FIFO, a device such as /dev/zero, a
/// socket) is refused without reading it, since its end may never come; a FIFO is
/// opened without blocking. The mapping is released when the last SharedBytes sharing it is destroyed.
/// The file must not be truncated or rewritten in place while mapped (a read of a
/// vanished page faults, as with any mapping); write_safetensors replaces files by
/// rename, which leaves existing mappings intact.
/// Errors: NotFound when the file does not exist, IoError when it cannot be opened,
/// examined or read, or is not a regular file ("cannot read 'w.st': it is a directory,
/// not a regular file").
Result<ir::SharedBytes> map_file(const std::string& path);

/// Drops this process's resident pages of `bytes` when they lie inside a live map_file
/// mapping (the whole pages inside the span; madvise MADV_DONTNEED): for a caller that has
/// converted or copied them and will rarely read them again. Reading them later is correct
/// (they fault in again from the file); bytes not from map_file (heap, a read() fallback)
/// are left alone. Returns the number of bytes released.
std::size_t release_mapped_pages(std::span<const std::uint8_t> bytes);

/// Writes `bytes` to `path` atomically: a temporary file beside it (created exclusively:
/// "<path>.tmp.<pid>.<n>"), fsync, then rename over `path`, so readers (and mappings of
/// the old file) see either the old or the whole new file. The temporary is removed on
/// failure. Errors: IoError naming the path and the system's reason.
Result<void> write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes);

/// The temporary file write_file_atomic writes through, for a writer that streams: created
/// exclusively beside `path` ("<path>.tmp.<pid>.<n>"), open for writing (fd, close-on-exec).
struct ExclusiveTemp {
  int fd = -1;
  std::string path;
};
Result<ExclusiveTemp> create_temp_beside(const std::string& path);

}  // namespace ternjit::formats
