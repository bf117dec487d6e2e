// A stage is one layer of the GPU stack: data + a predicate (check) + an
// action (apply), after kubeadm's workflow phases. check() is always the
// authority on what is true now; the journal only records history.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/host.hpp"
#include "gpunode/options.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

namespace kube {
class Client;
}

enum class CheckStatus { kSatisfied, kNeeded, kBlocked };
const char* check_status_name(CheckStatus s);

struct Check {
  CheckStatus status = CheckStatus::kBlocked;
  std::string code;     // stable identifier, e.g. "handler.runtime-missing"
  std::string summary;  // one line: what is true now
  std::string fix;      // for blocked: the command or step that fixes it
  std::string action;   // for needed: what apply() will change
  std::vector<std::string> details;   // further facts worth showing
  std::vector<std::string> warnings;  // not blocking, but worth acting on
  // For needed: "layer: what" when the check looked for what stands in the
  // way and found it (the allocatable stage's diagnosis). status names it
  // in its last line rather than a lower stage's lesser change.
  std::string cause;
  ExitCode exit = ExitCode::kBlocked;  // for blocked: the class of failure
};

// The code of a check that could not ask the cluster (the kubeconfig, the
// API server): the runner reports that once as the "cluster" layer, not as
// the failure of each stage that needed it (kube/cluster.hpp).
inline constexpr const char* kClusterConnectionCode = "cluster.unreachable";

Check satisfied(std::string code, std::string summary);
Check needed(std::string code, std::string summary, std::string action);
Check blocked(std::string code, std::string summary, std::string fix,
              ExitCode exit = ExitCode::kBlocked);

// A bundle that passed verification in this run: what the stages take from it.
struct VerifiedBundle {
  std::string dir;
  std::string summary;                // files, bytes, signer
  std::string device_plugin_archive;  // real path inside the bundle, or empty
  std::string device_plugin_ref;
  std::string min_driver;         // may be empty
  std::uint64_t image_bytes = 0;  // the image archives' total size
  // manifests/*.yml as the bundle carries them (read once, after their
  // hashes verified), by file name; the stages install these, not the
  // running binary's compiled-in copies.
  std::map<std::string, std::string> manifests;
};

// Results one stage learns that a later stage needs; each consumer falls
// back to finding the fact itself when the producing stage was skipped.
struct Facts {
  std::optional<GpuInventory> gpus;
  std::shared_ptr<kube::Client>
      kube;                         // one connection per run (kube/cluster.hpp)
  std::optional<std::string> node;  // this host's Kubernetes node name
  std::optional<VerifiedBundle>
      bundle;  // --bundle, verified (stages/bundle_facts.hpp)
  // The cluster could not be reached at all (kube/cluster.hpp
  // cluster_blocked): later stages are told so at once.
  std::optional<Error> cluster_down;
  // (layer, text): found while getting a fact, not blocking; the runner
  // reports each once, after the check that found it.
  std::vector<std::pair<std::string, std::string>> warnings;
};

struct Context {
  Host& host;
  const Options& opts;
  Facts facts;
  std::chrono::steady_clock::time_point deadline;

  std::chrono::milliseconds time_left() const;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual std::string_view name() const = 0;
  // The layer in the operator's words, e.g. "NVIDIA driver".
  virtual std::string_view layer() const = 0;
  // A canonical text of everything check()/apply() depend on; its digest is
  // journaled so history can say whether the inputs changed since.
  virtual std::string inputs(Context& ctx) const = 0;
  virtual Check check(Context& ctx) = 0;
  // Called only when check() answered kNeeded and this is not a dry run.
  virtual Result<void> apply(Context& ctx, const Check& needed) = 0;
};

using StageList = std::vector<std::unique_ptr<Stage>>;

}  // namespace gpunode
