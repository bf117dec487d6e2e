#include "proof/proof_pod.hpp"

#include <algorithm>
#include <cctype>

#include "kube/manifests.hpp"

namespace gpunode {

namespace {

using nlohmann::json;

// Not a host spawn (gpunode spawns nothing through a shell): the command of
// a container, run inside the Pod by its image's /bin/sh. The script is a
// constant with no text of ours or the cluster's in it; the shell is the one
// way to print the GPU the runtime gave the container before exec'ing the
// unmodified sample, which prints none (cuda-samples vectorAdd.cu).
// POSIX sh, the same for every Pod: printf's word splitting gives one line
// per UUID of nvidia-smi's output (one per line).
constexpr const char* kProofScript =
    "u=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null) "
    "|| u=${NVIDIA_VISIBLE_DEVICES:-none}; "
    "printf 'gpunode-proof gpu=%s\\n' $u; "
    "exec /cuda-samples/vectorAdd";

bool uuid_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == ':';
}

}  // namespace

json proof_pod(const ProofPodSpec& spec) {
  // Placed by the scheduler, on this node only (a matchFields term on
  // metadata.name, as the DaemonSet controller places its pods), so a slot
  // it cannot have shows as Unschedulable rather than a kubelet's refusal.
  const json on_node = {
      {"requiredDuringSchedulingIgnoredDuringExecution",
       {{"nodeSelectorTerms",
         json::array(
             {{{"matchFields",
                json::array({{{"key", "metadata.name"},
                              {"operator", "In"},
                              {"values", json::array({spec.node})}}})}}})}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", spec.name},
            {"namespace", kProofNamespace},
            {"labels",
             {{kManagedByLabel, "gpunode"}, {kProofRunLabel, spec.run_id}}}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"runtimeClassName", "nvidia"},
            {"affinity", {{"nodeAffinity", on_node}}},
            {"tolerations", json::array({{{"key", "nvidia.com/gpu"},
                                          {"operator", "Exists"},
                                          {"effect", "NoSchedule"}}})},
            {"containers",
             json::array(
                 {{{"name", "cuda"},
                   {"image", spec.image},
                   {"command", json::array({"/bin/sh", "-c", kProofScript})},
                   {"resources", {{"limits", spec.limits}}}}})}}}};
}

std::vector<std::string> gpus_in_log(const std::string& log) {
  std::vector<std::string> out;
  const std::string mark = kProofMark;
  std::size_t at = 0;
  while ((at = log.find(mark, at)) != std::string::npos) {
    const bool line_start = at == 0 || log[at - 1] == '\n';
    at += mark.size();
    if (!line_start) continue;
    std::size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    std::size_t start = 0;
    while (start <= line.size()) {
      std::size_t comma = line.find(',', start);
      if (comma == std::string::npos) comma = line.size();
      std::string word = line.substr(start, comma - start);
      while (!word.empty() &&
             std::isspace(static_cast<unsigned char>(word.back())))
        word.pop_back();
      const bool ok = !word.empty() && word.size() <= 96 && word != "none" &&
                      word != "void" && word != "all" &&
                      std::all_of(word.begin(), word.end(), uuid_char);
      if (ok && std::find(out.begin(), out.end(), word) == out.end())
        out.push_back(word);
      start = comma + 1;
    }
    at = end;
  }
  return out;
}

}  // namespace gpunode
