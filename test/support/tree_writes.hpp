// What a run wrote on a host tree, seen from outside: every entry's size and
// modification and change times (nanoseconds). Two snapshots differ where
// something was written, even with the same bytes (a file rewritten in
// place, a directory whose entries were replaced by a rename), which a
// snapshot of contents (snapshot_tree) cannot see.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpunode::test {

using TimesSnapshot = std::map<std::string, std::string>;

// Entries under `dir`, by their path below it ("" is `dir` itself).
TimesSnapshot snapshot_times(const std::string& dir);

// The paths written, created or removed between `before` and `after`.
std::vector<std::string> written_between(const TimesSnapshot& before,
                                         const TimesSnapshot& after);

}  // namespace gpunode::test
