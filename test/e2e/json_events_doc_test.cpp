// docs/json-events.md against what the real binary emits: every facts field
// documented for the node's stages appears in a real run's --json, and every
// one a run emits is documented, so the schema's document cannot drift.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "driver_sim_host.hpp"
#include "gpunode/report.hpp"
#include "oci_builder.hpp"
#include "sim_cluster.hpp"
#include "sim_gpu_node.hpp"
#include "test_support.hpp"
#include "toolkit_bundle.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

// The stages whose facts this test holds the document to: every stage that
// status runs (smoke is opt-in, and has its own unit test), as the
// binary's own list gives them (`version --json`'s stage_parts), so a new
// stage needs no edit here.
std::set<std::string> status_stages() {
  Run r = run_gpunode({"version", "--json"});
  REQUIRE(r.exit_code == 0);
  const json version = json::parse(r.out);
  std::set<std::string> out;
  for (const auto& s : version["stage_parts"])
    if (s["opt_in"] == false) out.insert(s["name"].get<std::string>());
  return out;
}

// stage -> field path -> its documented type, from the "## Stage facts"
// tables: rows "| `path` | type | meaning |" under "### <stage>".
std::map<std::string, std::map<std::string, std::string>> documented(
    const std::string& md) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::istringstream in(md);
  std::string line, stage;
  bool in_facts = false;
  const std::regex row(R"(^\| `([^`]+)` \| ([^|]+) \|)");
  for (; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_facts = line == "## Stage facts";
    if (!in_facts) continue;
    if (line.rfind("### ", 0) == 0) stage = line.substr(4);
    std::smatch m;
    if (!stage.empty() && std::regex_search(line, m, row))
      out[stage][m[1]] = m[2];
  }
  return out;
}

// Every field path in a facts object ("a", "a.b", "a[].b"), and those
// whose value is null.
void paths(const json& v, const std::string& at, std::set<std::string>& out,
           std::set<std::string>& nulls) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string p = at.empty() ? it.key() : at + "." + it.key();
      out.insert(p);
      if (it->is_null()) nulls.insert(p);
      paths(*it, p, out, nulls);
    }
  } else if (v.is_array()) {
    for (const auto& e : v) {
      if (e.is_object()) paths(e, at + "[]", out, nulls);
    }
  }
}

// The stage events' facts of a run, by stage: each path seen, and the paths
// whose value was null.
struct Emitted {
  std::map<std::string, std::set<std::string>> fields, nulls;
  int schema = -1;
};
void collect(const Run& r, Emitted& e) {
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line);
    if (j.value("event", "") == "result") e.schema = j.value("schema", -1);
    if (j.value("event", "") != "stage" || !j.contains("facts")) continue;
    const std::string stage = j["stage"];
    paths(j["facts"], "", e.fields[stage], e.nulls[stage]);
  }
}

bool has_nullable_parent(const std::string& path,
                         const std::map<std::string, std::string>& doc,
                         const std::set<std::string>& nulls) {
  for (std::size_t dot = path.rfind('.'); dot != std::string::npos;
       dot = path.rfind('.', dot - 1)) {
    const std::string parent = path.substr(0, dot);
    auto it = doc.find(parent);
    if (it != doc.end() && it->second.find("null") != std::string::npos &&
        nulls.count(parent))
      return true;
    if (dot == 0) break;
  }
  return false;
}

}  // namespace

TEST_CASE("json-events.md documents the facts a real status run emits",
          "[e2e][json]") {
  REQUIRE_PARTS();
  const std::string md = read_text(std::string(GPUNODE_TEST_FIXTURES) +
                                   "/../../docs/json-events.md");
  const auto doc = documented(md);
  const std::set<std::string> kStages = status_stages();
  REQUIRE(kStages.size() >= 9);
  for (const auto& s : kStages) {
    INFO(s);
    REQUIRE(doc.count(s) == 1);
    CHECK(doc.at(s).size() >= 4);
  }
  CHECK_THAT(md, Catch::Contains("version " +
                                 std::to_string(gpunode::kJsonSchemaVersion)));

  // A fresh node (plan: the image is to be imported), then installed
  // (status: converged, with a --min-driver given).
  SimGpuNode node;
  Emitted e;
  Run plan = node.gpunode({"plan", "--image-archive", node.archive, "--json"});
  INFO(plan.err);
  REQUIRE(plan.exit_code == 0);
  collect(plan, e);
  Run install = node.install();
  REQUIRE(install.exit_code == 0);
  Run status = node.gpunode({"status", "--json", "--min-driver", "500.0"});
  INFO(status.err);
  REQUIRE(status.exit_code == 0);
  collect(status, e);
  CHECK(e.schema == gpunode::kJsonSchemaVersion);

  // Many nodes: the node part on an agent (what its pod shows), the cluster
  // part's view of every GPU node, and a plan that changes their slots.
  SimClusterOptions o;
  o.nodes = {{"server", true, 0, "cpu-server"}, {"gpu-a", false, 1, ""}};
  SimCluster cluster(o);
  REQUIRE(
      cluster.gpunode("server", {"install", "--scope", "cluster"}).exit_code ==
      0);
  REQUIRE(cluster
              .gpunode("gpu-a",
                       {"install", "--image-archive", cluster.image_archive()})
              .exit_code == 0);
  for (auto [node, args] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"gpu-a", {"status", "--json"}},
           {"server", {"status", "--json", "--scope", "cluster"}},
           {"server",
            {"plan", "--json", "--scope", "cluster", "--variant",
             "time-slicing", "--replicas", "2"}}}) {
    Run r = cluster.gpunode(node, args);
    INFO(node << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    collect(r, e);
  }

  // The driver's facts that no --root run can show (CUDA is asked only at
  // "/"), nor a single H200 (NVSwitch boards, Xid errors, a CUDA error):
  // the real stage's check over host trees at "/", with the stand-in
  // libraries of test/stubs.
  auto driver_facts = [&](const char* scenario,
                          std::vector<std::pair<const char*, std::string>> env,
                          bool at_root) {
    DriverSimHost sim(scenario);
    sim.env.set("GPUNODE_STUB_CUDA_DEVICES", "1");
    for (const auto& [name, value] : env) sim.env.set(name, value);
    if (at_root) sim.use_libraries();
    const auto c = sim.check();
    std::set<std::string> ignored;
    paths(c.facts, "", e.fields["driver"], ignored);
  };
  const std::string derived =
      std::string(GPUNODE_TEST_FIXTURES) + "/gpu/derived/";
  driver_facts("good-v3", {}, true);
  driver_facts("good-v3", {{"GPUNODE_STUB_CUDA_INIT", "802"}}, true);
  driver_facts("good-v3", {{"GPUNODE_STUB_CUDA_FAIL", "cuMemAlloc_v2:0:2"}},
               true);
  driver_facts("good-v3", {{"GPUNODE_STUB_NVML_ECC", "0:rc=999"}}, true);
  driver_facts("hgx",
               {{"GPUNODE_STUB_NVML_GPUS", "8"},
                {"GPUNODE_STUB_NVML_FABRIC", "completed"},
                {"GPUNODE_SIM_KERNEL_LOG", derived + "dmesg-xid-94-95.txt"}},
               true);

  // The toolkit's package facts (null without --bundle): a plan over a node
  // without the toolkit whose bundle carries NVIDIA's rpm set, then the
  // same with an rpm that cannot read its database (query_error).
  {
    TempDir t;
    const std::string root = t.path() + "/node";
    const std::string bundle = t.path() + "/bundle";
    make_host_tree(root, "no-toolkit");
    REQUIRE(run_with_sim(
                {"rpm", "--root", root, "--dbpath", "/var/lib/rpm", "--initdb"})
                .exit_code == 0);
    write_toolkit_bundle(
        bundle, make_bundle_packages(t.path() + "/rpm", "rpm", "1.17.8-1"));
    const std::vector<std::string> plan{
        "plan",     "--root",  root,
        "--bundle", bundle,    "--insecure-skip-signature",
        "--only",   "toolkit", "--json"};
    Run r = run_gpunode(plan);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    collect(r, e);
    std::filesystem::create_directories(t.path() + "/rpm-bin");
    write_text(t.path() + "/rpm-bin/rpm", "#!/bin/sh\nexit 1\n", 0755);
    Run broken =
        run_gpunode(plan, {"PATH=" + t.path() + "/rpm-bin:" + GPUNODE_TEST_SIM +
                           "/bin:" + std::getenv("PATH")});
    INFO(broken.err);
    REQUIRE(broken.exit_code == 1);
    collect(broken, e);
  }

  // And what the real H200 emitted (test/fixtures/gpu/README.md): every
  // field of it must be documented.
  {
    std::istringstream lines(read_text(std::string(GPUNODE_TEST_FIXTURES) +
                                       "/gpu/h200-580.159.04/"
                                       "status-only-driver.json"));
    std::set<std::string> real, ignored;
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line);
      if (j.value("stage", "") == "driver")
        paths(j["facts"], "", real, ignored);
    }
    REQUIRE(real.count("cuda.outcome") == 1);
    for (const auto& path : real) {
      INFO("the real H200 emitted, not documented: driver " << path);
      CHECK(doc.at("driver").count(path) == 1);
    }
  }

  // And what the toolkit stage emitted on a real Ubuntu 24.04 host with its
  // real dpkg (test/fixtures/gpu/README.md): to be installed, then in place.
  for (const char* fixture : {"plan-only-toolkit-ubuntu2404.json",
                              "status-only-toolkit-ubuntu2404.json"}) {
    const json j = json::parse(read_text(std::string(GPUNODE_TEST_FIXTURES) +
                                         "/gpu/h200-580.159.04/" + fixture));
    std::set<std::string> real, ignored;
    paths(j["facts"], "", real, ignored);
    REQUIRE(real.count("packages.os_id") == 1);
    for (const auto& path : real) {
      INFO(fixture << " emitted, not documented: toolkit " << path);
      CHECK(doc.at("toolkit").count(path) == 1);
    }
  }

  for (const auto& s : kStages) {
    const auto& fields = doc.at(s);
    for (const auto& [path, type] : fields) {
      INFO("documented but not emitted: " << s << " " << path);
      CHECK((e.fields[s].count(path) == 1 ||
             has_nullable_parent(path, fields, e.nulls[s])));
    }
    for (const auto& path : e.fields[s]) {
      INFO("emitted but not documented: " << s << " " << path);
      CHECK(fields.count(path) == 1);
    }
  }
}

namespace {

// The `progress` event's table (field -> type) from json-events.md.
std::map<std::string, std::string> documented_progress(const std::string& md) {
  std::map<std::string, std::string> out;
  std::istringstream in(md);
  std::string line;
  bool in_table = false;
  const std::regex row(R"(^\| `([^`]+)` \| ([^|]+) \|)");
  while (std::getline(in, line)) {
    if (line.rfind("### ", 0) == 0)
      in_table = line.rfind("### `progress`", 0) == 0;
    std::smatch m;
    if (in_table && std::regex_search(line, m, row)) out[m[1]] = m[2];
  }
  return out;
}

// The documented type word a JSON value fits.
bool fits(const json& v, const std::string& type) {
  auto has = [&](const char* w) { return type.find(w) != std::string::npos; };
  if (v.is_null()) return has("null");
  if (v.is_string()) return has("string");
  if (v.is_number_integer()) return has("integer") || has("number");
  if (v.is_number()) return has("number");
  return false;
}

}  // namespace

TEST_CASE("json-events.md documents the progress event bundle verify emits",
          "[e2e][json][progress]") {
  const std::string md = read_text(std::string(GPUNODE_TEST_FIXTURES) +
                                   "/../../docs/json-events.md");
  const auto doc = documented_progress(md);
  REQUIRE(doc.size() >= 9);
  TempDir tmp;
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  Run c = run_gpunode({"bundle", "create", "--out", tmp.path() + "/bundle",
                       "--image-archive", tmp.path() + "/plugin.tar"});
  REQUIRE(c.exit_code == 0);
  Run v = run_gpunode({"bundle", "verify", tmp.path() + "/bundle",
                       "--insecure-skip-signature", "--json"});
  INFO(v.err);
  REQUIRE(v.exit_code == 0);
  std::istringstream lines(v.out);
  int events = 0;
  std::set<std::string> states;
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line);
    if (j.value("event", "") != "progress") continue;
    ++events;
    states.insert(j.value("state", ""));
    for (auto it = j.begin(); it != j.end(); ++it) {
      INFO("progress field " << it.key() << " = " << it->dump());
      REQUIRE(doc.count(it.key()) == 1);
      CHECK(fits(*it, doc.at(it.key())));
    }
    for (const auto& [field, type] : doc) {
      INFO("documented but not emitted: progress " << field);
      CHECK(j.contains(field));
    }
  }
  CHECK(events >= 2);
  CHECK(states == std::set<std::string>{"running", "done"});
}
