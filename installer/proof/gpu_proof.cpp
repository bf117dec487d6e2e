#include "proof/gpu_proof.hpp"

#include <algorithm>

#include "gpunode/crash_point.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/utc_time.hpp"
#include "plugin/gpu_nodes.hpp"
#include "proof/pod_watch.hpp"
#include "proof/proof_pod.hpp"

namespace gpunode {

namespace {

using kube::json;

long long requested(const json& pod, const std::string& resource) {
  long long sum = 0;
  for (const auto& c :
       pod.value("spec", json::object()).value("containers", json::array())) {
    const json limits =
        c.value("resources", json::object()).value("limits", json::object());
    if (!limits.contains(resource)) continue;
    const json& v = limits[resource];
    if (v.is_number_integer()) sum += v.get<long long>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (!s.empty() && s.size() < 10 &&
          s.find_first_not_of("0123456789") == std::string::npos)
        sum += std::stoll(s);
    }
  }
  return sum;
}

// The Pods a proof of one node made, deleted at the end whatever happens.
class PodSweep {
 public:
  PodSweep(Context& ctx, kube::Client& kube) : ctx_(ctx), kube_(kube) {}
  ~PodSweep() {
    while (!pods_.empty()) remove(pods_.front());
  }
  void made(const std::string& pod) { pods_.push_back(pod); }
  // By value: the name may be pods_'s own element, which erase destroys.
  void remove(std::string pod) {
    InterruptShield finish;  // a stop signal must not leave it behind
    auto at = std::find(pods_.begin(), pods_.end(), pod);
    if (at == pods_.end()) return;
    pods_.erase(at);
    (void)kube_.remove(
        std::string("/api/v1/namespaces/") + kProofNamespace + "/pods/" + pod,
        grace_after(ctx_));
  }

 private:
  Context& ctx_;
  kube::Client& kube_;
  std::vector<std::string> pods_;
};

GpuProof* find_gpu(NodeProof& p, const std::string& uuid) {
  for (GpuProof& g : p.gpus)
    if (g.uuid == uuid) return &g;
  return nullptr;
}

}  // namespace

bool NodeProof::ok() const {
  if (stopped || interrupted || error || gpus.empty()) return false;
  return std::all_of(gpus.begin(), gpus.end(),
                     [](const GpuProof& g) { return g.result == "passed"; });
}

std::vector<std::string> NodeProof::with_result(const std::string& r) const {
  std::vector<std::string> out;
  for (const GpuProof& g : gpus)
    if (g.result == r) out.push_back(g.uuid);
  return out;
}

Result<long long> free_slots(kube::Client& kube, const std::string& node,
                             const std::string& resource,
                             std::chrono::steady_clock::time_point deadline) {
  auto live = kube.get("/api/v1/nodes/" + node, deadline);
  if (!live) return live.error();
  if (!*live) return 0LL;
  long long free = advertised(**live, resource).value_or(0);
  auto pods =
      kube.list("/api/v1/pods?fieldSelector=spec.nodeName%3D" + node, deadline);
  if (!pods) return pods.error();
  for (const auto& pod : pods->value("items", json::array())) {
    const std::string phase =
        pod.value("status", json::object()).value("phase", "");
    if (phase == "Succeeded" || phase == "Failed") continue;
    free -= requested(pod, resource);
  }
  return std::max(0LL, free);
}

NodeProof prove_node(Context& ctx, kube::Client& kube, const ProofTarget& t,
                     const ProofSetup& setup) {
  Clock& clock = ctx.host.clock();
  const auto started = clock.steady_now();
  NodeProof out;
  out.node = t.node;
  out.uuids_published = !t.uuids.empty();
  for (const std::string& u : t.uuids) out.gpus.push_back({u, "unreached"});
  const int gpus = std::max<int>(t.gpus, static_cast<int>(t.uuids.size()));
  // Enough for any allocation that is not adversarial: every slot of every
  // GPU once, and each GPU once more.
  const int bound = std::max(1, gpus * std::max(1, t.slots_per_gpu) + gpus);
  auto settled = [&]() {
    int done = 0;
    for (const GpuProof& g : out.gpus) done += g.result != "unreached";
    if (out.uuids_published) return done == static_cast<int>(out.gpus.size());
    return done >= gpus;
  };
  PodSweep sweep(ctx, kube);
  int unattributed = 0;
  for (int round = 0; !settled() && out.pods < bound; ++round) {
    if (stop_requested()) {
      out.interrupted = true;
      break;
    }
    int uncovered = gpus;
    for (const GpuProof& g : out.gpus) uncovered -= g.result != "unreached";
    uncovered = std::max(1, uncovered);
    auto free = free_slots(kube, t.node, setup.resource, ctx.deadline);
    if (!free) {
      out.interrupted = free.error().exit == ExitCode::kInterrupted;
      if (!out.interrupted)
        out.stopped =
            SmokeCause{"smoke.unknown", "cluster", free.error().message,
                       free.error().fix, free.error().exit};
      break;
    }
    // The first round asks for one slot per GPU not yet proven; later ones
    // take every free slot at once, so the plugin cannot hand the same
    // GPU's replicas out again and again. No free slot: one Pod, whose
    // Unschedulable the diagnosis names.
    const long long slots = std::max(1LL, *free);
    const long long want =
        round == 0 ? uncovered : std::max<long long>(uncovered, slots);
    const int batch =
        static_cast<int>(std::min<long long>({slots, want, bound - out.pods}));
    std::vector<std::string> made;
    for (int i = 0; i < batch; ++i) {
      const std::string name =
          setup.run_id + "-" + std::to_string(out.pods + i);
      auto created = kube.create(
          std::string("/api/v1/namespaces/") + kProofNamespace + "/pods",
          proof_pod({name, setup.run_id, t.node, setup.image, setup.limits}),
          ctx.deadline);
      if (!created) {
        // Cut off in flight, the POST may still have made it.
        if (created.error().exit == ExitCode::kInterrupted ||
            created.error().exit == ExitCode::kTimeout)
          sweep.made(name);
        out.interrupted = created.error().exit == ExitCode::kInterrupted;
        if (!out.interrupted) {
          const auto refused = cause_of_refusal(created.error());
          out.error =
              refused ? Error{refused->exit, refused->layer, refused->message,
                              refused->fix, created.error().status}
                      : created.error();
        }
        break;
      }
      sweep.made(name);
      made.push_back(name);
    }
    out.pods += static_cast<int>(made.size());
    crash_point("proof:created");
    for (const std::string& pod : made) {
      if (out.stopped || out.interrupted || out.error) break;
      out.last_pod = pod;
      const SmokeSubject subject{pod, setup.image, setup.import_fix, t.node};
      PodOutcome o = watch_pod_to_end(ctx, kube, subject);
      const std::string at = iso8601_utc(clock.now());
      sweep.remove(pod);
      out.events = o.events;
      if (o.interrupted) {
        out.interrupted = true;
        break;
      }
      const std::vector<std::string> seen = gpus_in_log(o.log);
      // The program itself failed on the GPUs it names: those GPUs failed.
      // Any other cause is below the GPUs, and every Pod meets it alike.
      if (o.failure && (o.failure->code != "smoke.failed" || seen.empty())) {
        out.stopped = o.failure;
        break;
      }
      if (seen.empty()) ++unattributed;
      for (const std::string& uuid : seen) {
        GpuProof* g = find_gpu(out, uuid);
        if (g == nullptr) {
          out.gpus.push_back({uuid, "unreached"});
          g = &out.gpus.back();
        }
        if (g->result == "failed") continue;  // a failure stays named
        g->result = o.failure ? "failed" : "passed";
        g->pod = pod;
        g->at = at;
        g->message = o.failure ? o.failure->message : std::string();
      }
    }
    if (out.stopped || out.interrupted || out.error) break;
    if (unattributed > 0 && out.with_result("passed").empty() &&
        out.with_result("failed").empty()) {
      out.stopped = SmokeCause{
          "smoke.unattributed", "smoke",
          "the CUDA Pods on node " + t.node +
              " passed, but their logs do not say which GPU each was given",
          "use an image with /bin/sh and the sample at /cuda-samples/"
          "vectorAdd (--smoke-image; NVIDIA's cuda-sample:vectoradd images "
          "have both)"};
      break;
    }
  }
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      clock.steady_now() - started);
  return out;
}

}  // namespace gpunode
