#include "sim_gpu_node.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gpunode/images_lock.hpp"
#include "oci_builder.hpp"

namespace gpunode::test {

SimGpuNode::SimGpuNode(const std::string& scenario, int gpu_count,
                       int plugin_start_ms)
    : gpus(gpu_count) {
  ctd.reset();
  make_host_tree(root, scenario);
  build_image(archive, ImageSpec{});
  SimOptions o;
  o.root = root;
  o.containerd_socket = ctd.socket();
  o.gpus = gpus;
  o.plugin_start_ms = plugin_start_ms;
  sim = std::make_unique<K3sSim>(o);
}

std::string SimGpuNode::cuda_sample_archive() {
  const std::string sample = dir.path() + "/cuda-sample.tar";
  ImageSpec spec;
  spec.ref_name = gpunode::locked_cuda_sample_image().ref;
  spec.seed = 7;
  build_image(sample, spec);
  return sample;
}

std::vector<std::string> SimGpuNode::env() const {
  const char* path = std::getenv("PATH");
  return {"PATH=" + ctd.bin_dir() + ":" + std::string(GPUNODE_TEST_SIM) +
              "/bin:" + (path ? path : "/usr/bin:/bin"),
          "GPUNODE_SIM_GPU_COUNT=" + std::to_string(gpus),
          "GPUNODE_SIM_ROOT=" + root};
}

Run SimGpuNode::gpunode(std::vector<std::string> args,
                        const std::vector<std::string>& extra_env) {
  args.insert(args.begin() + 1, {"--root", root});
  std::vector<std::string> e = env();
  e.insert(e.end(), extra_env.begin(), extra_env.end());
  return run_gpunode(args, e);
}

std::vector<std::string> SimGpuNode::install_argv(
    std::vector<std::string> extra) const {
  std::vector<std::string> args{GPUNODE_BINARY, "install",         "--root",
                                root,           "--image-archive", archive};
  if (std::find(extra.begin(), extra.end(), "--timeout") == extra.end()) {
    args.insert(args.end(), {"--timeout", "60s"});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

Run SimGpuNode::install(std::vector<std::string> extra,
                        const std::vector<std::string>& extra_env) {
  std::vector<std::string> e = env();
  e.insert(e.end(), extra_env.begin(), extra_env.end());
  return run_with_sim(install_argv(std::move(extra)), e);
}

Run SimGpuNode::kubectl(std::vector<std::string> args) {
  args.insert(args.begin(), {"kubectl", "--kubeconfig", sim->kubeconfig()});
  return run_with_sim(args, env());
}

std::string SimGpuNode::allocatable(const std::string& resource) {
  nlohmann::json node = sim->object(kNodePath);
  auto a = node["status"]["allocatable"];
  return a.contains(resource) ? a[resource].get<std::string>() : "";
}

std::string SimGpuNode::plugin_pod() {
  Run r = kubectl({"-n", "kube-system", "get", "pods", "-l",
                   "name=nvidia-device-plugin-ds", "-o",
                   "jsonpath={.items[*].metadata.name}"});
  return r.out;
}

namespace {

using json = nlohmann::json;

constexpr const char* kImage = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";

// An object as far as the result goes: what was applied, not the server's
// bookkeeping (resourceVersion, uid, timestamps change with every write).
json essence(json object) {
  if (object.is_null()) return object;
  object.erase("status");
  auto& meta = object["metadata"];
  for (const char* k : {"resourceVersion", "uid", "creationTimestamp",
                        "generation", "managedFields"})
    meta.erase(k);
  return object;
}

}  // namespace

bool EndState::operator==(const EndState& o) const {
  return runtimeclass == o.runtimeclass && daemonset == o.daemonset &&
         configmap == o.configmap && allocatable == o.allocatable &&
         image == o.image && last_exit == o.last_exit &&
         last_finished == o.last_finished && state_dir == o.state_dir;
}

std::ostream& operator<<(std::ostream& os, const EndState& s) {
  os << "allocatable=" << s.allocatable << " image=[" << s.image
     << "] last_exit=" << s.last_exit << " finished=" << s.last_finished
     << " state_dir=";
  for (const auto& f : s.state_dir) os << f << ' ';
  os << "journal=";
  for (const auto& [k, v] : s.journal) os << k << ':' << v << ' ';
  return os << "\ndaemonset=" << s.daemonset.dump();
}

// The image's line in `ctr images ls`, without the size column's rounding
// (name, type, digest, ..., labels).
std::string image_line(SimGpuNode& node) {
  auto ls = node.ctd.ctr({"images", "ls", "name==" + std::string(kImage)});
  std::istringstream lines(ls.out);
  std::string line;
  std::getline(lines, line);  // header
  if (!std::getline(lines, line)) return "";
  std::istringstream words(line);
  std::vector<std::string> w;
  for (std::string x; words >> x;) w.push_back(x);
  return w.size() < 3 ? line : w[2] + " " + w.back();
}

bool image_complete(SimGpuNode& node) {
  auto check =
      node.ctd.ctr({"images", "check", "name==" + std::string(kImage)});
  return check.out.find("complete") != std::string::npos &&
         check.out.find("incomplete") == std::string::npos;
}

EndState end_state(SimGpuNode& node) {
  EndState s;
  s.runtimeclass = essence(node.sim->object(kRcPath));
  s.daemonset = essence(node.sim->object(kDsPath));
  s.configmap = essence(node.sim->object(kCmPath));
  s.allocatable = node.allocatable();
  s.image = image_line(node);
  const std::string state = node.root + "/var/lib/gpunode";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state, ec))
    s.state_dir.push_back(e.path().filename().string());
  std::sort(s.state_dir.begin(), s.state_dir.end());
  auto j = json::parse(read_text(state + "/journal.json"), nullptr, false);
  if (j.is_object()) {
    const json stages = j.contains("stages") ? j["stages"] : json::object();
    for (auto it = stages.begin(); it != stages.end(); ++it)
      s.journal[it.key()] = it->value("result", "");
    const json run = j.value("last_run", json::object());
    s.last_exit = run.value("exit_code", -1);
    s.last_finished = !run.value("finished_at", std::string()).empty();
  }
  return s;
}

std::string helm_device_plugin_yaml() {
  return R"(apiVersion: v1
kind: Namespace
metadata:
  name: nvidia-device-plugin
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvdp-nvidia-device-plugin
  namespace: nvidia-device-plugin
  labels:
    app.kubernetes.io/instance: nvdp
    app.kubernetes.io/managed-by: Helm
  annotations:
    meta.helm.sh/release-name: nvdp
    meta.helm.sh/release-namespace: nvidia-device-plugin
spec:
  selector:
    matchLabels:
      app: nvdp
  template:
    metadata:
      labels:
        app: nvdp
    spec:
      runtimeClassName: nvidia
      containers:
      - name: nvidia-device-plugin-ctr
        image: nvcr.io/nvidia/k8s-device-plugin:v0.19.3
)";
}

}  // namespace gpunode::test
