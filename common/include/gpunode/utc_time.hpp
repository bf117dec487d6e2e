// Times as text: ISO 8601 in UTC, to the second ("2026-12-01T12:00:00Z").
// The journal's records and bundle.toml's creation time both use it.
#pragma once

#include <chrono>
#include <string>

namespace gpunode {

std::string iso8601_utc(std::chrono::system_clock::time_point t);

}  // namespace gpunode
