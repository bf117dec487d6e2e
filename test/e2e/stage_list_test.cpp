// The stage list (installer/stages/stages.hpp, GPUNODE_STAGES) is the one
// source: what names stages elsewhere is held to it here, through the
// shipped binary's `version --json`. A new stage that the README's table,
// docs/json-events.md or the Ansible role does not know fails this test,
// naming the file to edit.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

const std::string kRepo = std::string(GPUNODE_TEST_FIXTURES) + "/../..";
const std::string kRole =
    kRepo + "/packaging/ansible/ansible_collections/gpunode/gpunode";

json version_json() {
  Run r = run_gpunode({"version", "--json"});
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

std::vector<std::string> names_in_part(const json& v, const std::string& part) {
  std::vector<std::string> out;
  for (const auto& s : v["stage_parts"])
    if (s["part"] == part) out.push_back(s["name"]);
  return out;
}

// Every `name` in "| `name` ..." rows of the README's stage table, in order.
std::vector<std::string> readme_table(const std::string& md) {
  std::vector<std::string> out;
  std::istringstream in(md);
  bool in_table = false;
  const std::regex row(R"(^\| `([a-z]+)`)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| stage | checks | changes |", 0) == 0)
      in_table = true;
    else if (in_table && line.rfind("|", 0) != 0)
      break;
    std::smatch m;
    if (in_table && std::regex_search(line, m, row)) out.push_back(m[1]);
  }
  return out;
}

// Group 1 of each match of `pattern` in `text`, in order.
std::vector<std::string> all_matches(const std::string& text,
                                     const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// The backticked words of a text, in order.
std::vector<std::string> backticked(const std::string& text) {
  return all_matches(text, "`([a-z]+)`");
}

// The one line of `text` that matches `pattern`'s group 1.
std::string one_match(const std::string& text, const std::string& pattern) {
  std::smatch m;
  const std::regex re(pattern);
  REQUIRE(std::regex_search(text, m, re));
  return m[1];
}

// The quoted names of a Python tuple's items: 'a', 'b-c'.
std::vector<std::string> python_tuple(const std::string& items) {
  return all_matches(items, "'([a-z-]+)'");
}

// The items of a YAML flow list's inside: "a, b-c".
std::vector<std::string> yaml_list(const std::string& items) {
  return all_matches(items, "([a-z-]+)");
}

bool in_pipeline_order(const std::vector<std::string>& some,
                       const std::vector<std::string>& all) {
  std::size_t at = 0;
  for (const auto& name : some) {
    while (at < all.size() && all[at] != name) ++at;
    if (at == all.size()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("stage list: version --json gives every stage's part",
          "[stage-list]") {
  const json v = version_json();
  std::vector<std::string> from_parts;
  for (const auto& s : v["stage_parts"]) {
    from_parts.push_back(s["name"]);
    const std::set<std::string> parts = {"node", "cluster", "cluster-action"};
    CHECK(parts.count(s["part"].get<std::string>()) == 1);
  }
  CHECK(from_parts == v["stages"].get<std::vector<std::string>>());
  // Each part's scopes: a cluster stage is read by the node part too.
  const std::map<std::string, std::vector<std::string>> scopes_of = {
      {"node", {"node", "both"}},
      {"cluster", {"node", "cluster", "both"}},
      {"cluster-action", {"cluster", "both"}}};
  for (const auto& s : v["stage_parts"]) {
    INFO(s["name"]);
    CHECK(s["scopes"].get<std::vector<std::string>>() ==
          scopes_of.at(s["part"].get<std::string>()));
  }
  // The opt-in stage is the proof, an action of the cluster part.
  for (const auto& s : v["stage_parts"])
    if (s["opt_in"] == true) CHECK(s["part"] == "cluster-action");
}

TEST_CASE("stage list: the README's stage table has every stage in order",
          "[stage-list]") {
  const auto stages = version_json()["stages"].get<std::vector<std::string>>();
  INFO("edit README.md, section 'What this build does'");
  CHECK(readme_table(read_text(kRepo + "/README.md")) == stages);
}

TEST_CASE("stage list: json-events.md has every stage's facts section",
          "[stage-list]") {
  const json v = version_json();
  const std::string md = read_text(kRepo + "/docs/json-events.md");
  // The `stage` row names no stages: it points at the binary's list, so a
  // new stage edits no row here.
  INFO("edit docs/json-events.md, the `stage` event's `stage` row");
  const std::string row =
      one_match(md, R"(\| `stage` \| string \| the stage's name([^\n]*))");
  CHECK(row.find("`gpunode version --json`") != std::string::npos);
  CHECK(backticked(row).size() <= 3);
  // Every stage that status runs has its facts section.
  for (const auto& s : v["stage_parts"]) {
    if (s["opt_in"] == true) continue;
    INFO("edit docs/json-events.md: add '### " << s["name"].get<std::string>()
                                               << "' under Stage facts");
    CHECK(md.find("\n### " + s["name"].get<std::string>() + "\n") !=
          std::string::npos);
  }
}

TEST_CASE("stage list: the Ansible role's stage names are the binary's",
          "[stage-list]") {
  const json v = version_json();
  const auto stages = v["stages"].get<std::vector<std::string>>();
  const std::string module = read_text(kRole + "/plugins/modules/gpunode.py");
  INFO("edit plugins/modules/gpunode.py, CLUSTER_PART_STAGES");
  // The stages that read the cluster part's objects: the cluster part's.
  CHECK(
      python_tuple(one_match(module, R"(CLUSTER_PART_STAGES = \(([^)]*)\))")) ==
      names_in_part(v, "cluster"));
  for (const char* task : {"cluster.yml", "check.yml"}) {
    INFO(std::string("edit roles/gpunode/tasks/") + task + ", its only:");
    const std::string yml =
        read_text(kRole + "/roles/gpunode/tasks/" + std::string(task));
    const auto lists = all_matches(yml, R"(only: \[([^\]]*)\])");
    CHECK_FALSE(lists.empty());
    for (const std::string& list : lists)
      CHECK(in_pipeline_order(yaml_list(list), stages));
  }
}

TEST_CASE("stage list: the Ansible role's variant choices are the binary's",
          "[stage-list]") {
  const auto variants =
      version_json()["variants"].get<std::vector<std::string>>();
  CHECK(variants == std::vector<std::string>{"default", "time-slicing"});
  {
    INFO("edit plugins/module_utils/gpunode_run.py, VARIANTS");
    CHECK(python_tuple(one_match(
              read_text(kRole + "/plugins/module_utils/gpunode_run.py"),
              R"(VARIANTS = \(([^)]*)\))")) == variants);
  }
  for (const char* file :
       {"/plugins/modules/gpunode.py", "/plugins/modules/gpunode_facts.py",
        "/roles/gpunode/meta/argument_specs.yml"}) {
    INFO(std::string("edit ") + file + ": the variant's choices");
    const std::string text = read_text(kRole + file);
    // The documented choices (ansible-doc, the role's argument spec).
    CHECK(yaml_list(one_match(text, R"(choices: \[(default[^\]]*)\])")) ==
          variants);
    // No hard-coded list in an argument spec: VARIANTS is its one owner.
    CHECK(text.find("choices=['default'") == std::string::npos);
  }
}
