#include "gpunode/journal.hpp"

#include <catch2/catch.hpp>

#include "gpunode/system_host.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::TempDir;

TEST_CASE("a journal survives a round trip through its file", "[journal]") {
  TempDir dir;
  auto fs = make_rooted_file_system(dir.path());
  Journal j;
  j.stages["driver"] = {"satisfied", "abc", "2026-11-29T10:00:00Z",
                        "2026-11-29T10:00:01Z", "ok"};
  j.stages["handler"] = {"started", "def", "2026-11-29T10:00:02Z", "",
                         "restart k3s"};
  j.last_run = RunRecord{"install", "2026-11-29T10:00:00Z", "", -1};
  REQUIRE(save_journal(*fs, "/var/lib/gpunode", j));

  LoadedJournal loaded = load_journal(*fs, "/var/lib/gpunode");
  CHECK_FALSE(loaded.warning);
  CHECK(loaded.journal.stages.at("driver").result == "satisfied");
  CHECK(loaded.journal.stages.at("handler").finished_at.empty());
  REQUIRE(loaded.journal.last_run);
  CHECK(loaded.journal.last_run->exit_code == -1);
  // Written with owner-only permissions, and no temporary file left behind.
  CHECK(fs->stat("/var/lib/gpunode/journal.json")->mode == 0600);
  CHECK(fs->list_dir("/var/lib/gpunode") ==
        std::vector<std::string>{"journal.json"});
}

TEST_CASE("a corrupt or foreign journal is reported and treated as no history",
          "[journal]") {
  TempDir dir;
  auto fs = make_rooted_file_system(dir.path());
  const std::string path = dir.path() + "/state/journal.json";
  struct Case {
    const char* what;
    std::string text;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"truncated", R"({"version": 1, "stages": {"driver": {"res)",
       "not a JSON object"},
      {"future version", R"({"version": 99, "stages": {}})", "version 99"},
      {"no version", R"({"stages": {}})", "no version"},
      {"wrong types", R"({"version": 1, "stages": {"driver": {"result": 5}}})",
       "not a string"},
      {"stages not an object", R"({"version": 1, "stages": []})",
       "stages is not an object"},
      {"empty file", "", "not a JSON object"},
      {"binary junk", std::string("\x00\xff\x13\x37", 4), "not a JSON object"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      gpunode::test::write_text(path, c.text);
      LoadedJournal loaded = load_journal(*fs, "/state");
      REQUIRE(loaded.warning);
      CHECK_THAT(*loaded.warning, Catch::Contains(c.fragment));
      CHECK(loaded.journal.stages.empty());
      CHECK_FALSE(loaded.journal.last_run);
    }
  }
}

TEST_CASE("a journal that is a directory is reported, not a crash",
          "[journal]") {
  TempDir dir;
  auto fs = make_rooted_file_system(dir.path());
  REQUIRE(fs->create_directories("/state/journal.json"));
  LoadedJournal loaded = load_journal(*fs, "/state");
  REQUIRE(loaded.warning);
  CHECK_THAT(*loaded.warning, Catch::Contains("directory"));
}

TEST_CASE("a journal message with bytes that are not UTF-8 is saved",
          "[journal]") {
  // Stage messages quote what tools printed (nvidia-smi's garbage): saving
  // them used to throw json::type_error and end the run as "internal error".
  TempDir dir;
  auto fs = make_rooted_file_system(dir.path());
  Journal j;
  j.stages["driver"] = {"blocked", "abc", "2026-11-29T10:00:00Z",
                        "2026-11-29T10:00:01Z", "line 1: '\xff\xfe\x01'"};
  REQUIRE(save_journal(*fs, "/var/lib/gpunode", j));
  LoadedJournal loaded = load_journal(*fs, "/var/lib/gpunode");
  CHECK_FALSE(loaded.warning);
  CHECK_THAT(loaded.journal.stages.at("driver").message,
             Catch::StartsWith("line 1: '"));
}
