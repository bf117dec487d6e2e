#include "evidence/evidence_collect.hpp"

#include <fstream>
#include <sstream>

#include "cli/self_files.hpp"
#include "evidence/evidence_key.hpp"
#include "evidence/evidence_record.hpp"
#include "gpunode/context.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/kube.hpp"
#include "gpunode/pipeline.hpp"
#include "gpunode/report.hpp"
#include "gpunode/runner.hpp"
#include "gpunode/utc_time.hpp"

namespace gpunode {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxProofFile = 16 * 1024 * 1024;

// The digest of the binary that runs, as the bundle names files.
json own_binary() {
  json out = {{"version", GPUNODE_VERSION}, {"digest", nullptr}};
  auto self = locate_self();
  if (!self) return out;
  std::ifstream in(self->binary, std::ios::binary);
  Sha256 sha;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0)
    sha.update(buf, static_cast<std::size_t>(in.gcount()));
  if (in.bad() || !sha.ok()) return out;
  out["digest"] = "sha256:" + sha.hex();
  return out;
}

const json& facts_of(const json& stages, const std::string& name) {
  static const json none = json::object();
  for (const auto& s : stages)
    if (s.value("stage", "") == name && s.contains("facts") &&
        s["facts"].is_object())
      return s["facts"];
  return none;
}

json at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return nullptr;
    p = &(*p)[k];
  }
  return *p;
}

// This node's part of the last proof on this host: the server's proof
// covers every GPU node, a single node's its own.
json proof_of(const FileSystem& fs, const std::string& state_dir,
              const std::string& node) {
  auto text = fs.read_file(proof_record_path(state_dir), kMaxProofFile);
  if (!text)
    return {{"state", "none"},
            {"message",
             "no proof on this host yet (gpunode prove, or install --smoke, "
             "where the cluster part runs)"}};
  const json all = json::parse(*text, nullptr, false);
  if (!all.is_object()) return {{"state", "unreadable"}};
  json out = {{"state", "recorded"},
              {"at", all.value("at", json())},
              {"image", all.value("image", json())},
              {"proof", all.value("proof", json())},
              {"dcgm", all.value("dcgm", json())},
              {"gpus", json::array()}};
  for (const auto& g : all.value("gpus", json::array()))
    if (g.value("node", "") == node) out["gpus"].push_back(g);
  for (const auto& n : all.value("nodes", json::array()))
    if (n.value("node", "") == node) out["node"] = n;
  if (out["gpus"].empty()) out["state"] = "not proven on this host";
  return out;
}

}  // namespace

std::string proof_record_path(const std::string& state_dir) {
  return state_dir + "/proof.json";
}

Result<json> collect_evidence(Host& host, const Options& opts,
                              std::shared_ptr<kube::Client> cluster) {
  // Every stage's check, read-only, as status --json reports it.
  std::ostringstream out, err;
  Reporter report(out, err, true, false);
  StageList stages;
  for (auto& stage : make_pipeline())
    if (!stage->opt_in()) stages.push_back(std::move(stage));
  Options status = opts;
  status.only.clear();
  status.skip.clear();
  status.smoke = false;
  status.sharing_from_cluster = !opts.sharing_given;
  const ExitCode code =
      run_stages(host, status, RunMode::kStatus, std::move(stages), report,
                 no_progress(), KnownFacts{cluster, {}, {}});
  json checks = json::array();
  json result = json::object();
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    const json e = json::parse(line, nullptr, false);
    if (!e.is_object()) continue;
    if (e.value("event", "") == "stage")
      checks.push_back({{"stage", e.value("stage", "")},
                        {"status", e.value("status", "")},
                        {"code", e.value("code", json())},
                        {"summary", e.value("summary", "")},
                        {"facts", e.value("facts", json::object())}});
    if (e.value("event", "") == "result") result = e;
  }
  // The plan, and the Node's own account of its versions.
  Context ctx(host, opts, host.clock().steady_now() + opts.timeout,
              KnownFacts{cluster, {}, {}}, ClusterWrites::kDryRun);
  auto node = ctx.node();
  if (!node) return node.error();
  (void)ctx.node_plan();
  (void)ctx.expected_slots();
  json node_info = json::object();
  if (auto kube = ctx.cluster()) {
    auto live = (*kube)->get("/api/v1/nodes/" + *node, ctx.deadline);
    if (live && *live)
      node_info = (**live)
                      .value("status", json::object())
                      .value("nodeInfo", json::object());
  }
  const json& driver = facts_of(checks, "driver");
  const json& image = facts_of(checks, "image");
  json bundle = nullptr;
  if (opts.bundle) {
    const json& pre = facts_of(checks, "preflight");
    std::ifstream manifest(*opts.bundle + "/bundle.toml", std::ios::binary);
    std::stringstream text;
    text << manifest.rdbuf();
    bundle = {{"dir", *opts.bundle},
              {"manifest_digest",
               manifest ? json("sha256:" + sha256_hex(text.str())) : json()},
              {"signer", at(pre, {"bundle", "signer"})}};
  }
  return json{
      {"node", *node},
      {"role", result.value("role", json())},
      {"scope", result.value("scope", json())},
      {"time", iso8601_utc(host.clock().now())},
      {"gpunode", own_binary()},
      {"bundle", bundle},
      {"images",
       {{"device_plugin", at(image, {"image"})},
        {"smoke", at(image, {"smoke_image"})}}},
      {"versions",
       {{"driver", at(driver, {"driver_version"})},
        {"cuda", at(driver, {"cuda", "driver_api_version"})},
        {"toolkit", at(facts_of(checks, "toolkit"),
                       {"packages", "installed", "nvidia-container-toolkit"})},
        {"containerd", node_info.value("containerRuntimeVersion", json())},
        {"k3s", node_info.value("kubeletVersion", json())}}},
      {"plan", ctx.plan_so_far()},
      {"status",
       {{"exit_code", static_cast<int>(code)},
        {"summary", result.value("summary", json())}}},
      {"stages", checks},
      {"proof", proof_of(host.fs(), opts.state_dir, *node)}};
}

Result<WrittenEvidence> write_evidence(Host& host, const Options& opts,
                                       std::shared_ptr<kube::Client> cluster) {
  auto priv = read_evidence_private(host.fs(), opts.state_dir);
  if (!priv) return priv.error();
  auto pub = read_evidence_public(host.fs(), opts.state_dir);
  if (!pub) return pub.error();
  if (!*pub)
    return Error{ExitCode::kBlocked, "evidence",
                 "this node's evidence key has no public half",
                 "gpunode install (the labels stage makes the key)"};
  auto record = collect_evidence(host, opts, std::move(cluster));
  if (!record) return record.error();
  auto text = signed_evidence(*record, *priv, **pub);
  if (!text) return text.error();
  // A file name from the record's time: 2026-12-07T23:40:00Z ->
  // 20261207T234000Z (no ':' for tools that split on it).
  std::string stamp;
  for (char c : (*record)["time"].get<std::string>())
    if (c != '-' && c != ':') stamp += c;
  const std::string dir = opts.state_dir + "/evidence";
  if (auto r = host.fs().create_directories(dir); !r) return r.error();
  std::string path = dir + "/" + stamp + ".json";
  for (int n = 2; host.fs().stat(path); ++n)
    path = dir + "/" + stamp + "-" + std::to_string(n) + ".json";
  if (auto r = host.fs().write_file_atomic(path, *text, 0644); !r)
    return r.error();
  const auto verified = verify_evidence(*text);
  return WrittenEvidence{path, text->size(),
                         verified ? verified->fingerprint : std::string(),
                         *record};
}

}  // namespace gpunode
