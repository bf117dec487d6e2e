// Watches one proof Pod until it ends, or until a cause shows that waiting
// will not cure (the image missing, no sandbox, no free slot), then reads
// its events and log for the report. The diagnosis itself is
// stages/smoke_diagnosis.hpp; this does the requests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpunode/context.hpp"
#include "gpunode/kube.hpp"
#include "stages/smoke_diagnosis.hpp"

namespace gpunode {

struct PodOutcome {
  std::optional<SmokeCause> failure;  // nullopt: it printed Test PASSED
  std::string log;                    // untrusted text
  std::vector<PodEvent> events;       // read before its deletion
  bool interrupted = false;           // a stop signal ended the watch
};

// The run's deadline, or 10 s from now once it has passed: what the
// report's reads and the Pods' deletion get.
std::chrono::steady_clock::time_point grace_after(Context& ctx);

PodOutcome watch_pod_to_end(Context& ctx, kube::Client& kube,
                            const SmokeSubject& subject);

}  // namespace gpunode
