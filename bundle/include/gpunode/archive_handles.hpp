// Owning handles for libarchive (c_handle.hpp). A reader and a writer are
// both `archive *` but are freed by different functions, hence two types.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "gpunode/c_handle.hpp"

namespace gpunode {

using ArchiveReadPtr = CHandle<archive, archive_read_free>;
using ArchiveWritePtr = CHandle<archive, archive_write_free>;
using ArchiveEntryPtr = CHandle<archive_entry, archive_entry_free>;

}  // namespace gpunode
