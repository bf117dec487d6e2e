// CtrClient's imports report how much of the archive ctr has read: with a
// Progress set, import_file feeds the file through ctr's stdin and counts
// it; without one, ctr opens the file itself, as before.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "containerd/ctr_client.hpp"
#include "scripted_runner.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::ScriptedRunner;
using gpunode::test::TempDir;

namespace {

struct Recorded : Progress {
  std::string task, subject;
  std::uint64_t total = 0, added = 0;
  int starts = 0, finishes = 0;
  bool ok = false;
  void start(std::string_view t, std::string_view s,
             std::uint64_t total_bytes) override {
    ++starts;
    task = t;
    subject = s;
    total = total_bytes;
  }
  void add(std::uint64_t bytes) override { added += bytes; }
  void finish(bool o) override {
    ++finishes;
    ok = o;
  }
};

constexpr const char* kImport =
    "k3s ctr -n k8s.io images import --base-name nvidia/k8s-device-plugin";

std::string write_archive(const TempDir& tmp, std::size_t bytes) {
  const std::string path = tmp.path() + "/dp.tar";
  std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
  return path;
}

}  // namespace

TEST_CASE("ctr import: with a progress the file goes through stdin, counted",
          "[progress][ctr]") {
  TempDir tmp;
  const std::size_t size = (3u << 20) + 5;  // more than one 1 MiB read
  const std::string path = write_archive(tmp, size);
  ScriptedRunner proc;
  proc.script(std::string(kImport) + " -", "");
  CtrClient ctr(proc, std::chrono::seconds(5));
  Recorded progress;
  ctr.set_progress(progress);
  REQUIRE(ctr.import_file(path, "nvidia/k8s-device-plugin"));
  CHECK(proc.calls() == std::vector<std::string>{std::string(kImport) + " -"});
  CHECK(progress.task == "import");
  CHECK(progress.subject == "nvidia/k8s-device-plugin");
  CHECK(progress.total == size);
  CHECK(progress.added == size);
  CHECK(progress.finishes == 1);
  CHECK(progress.ok);
}

TEST_CASE("ctr import: without a progress ctr reads the file by its path",
          "[progress][ctr]") {
  TempDir tmp;
  const std::string path = write_archive(tmp, 100);
  ScriptedRunner proc;
  proc.script(std::string(kImport) + " " + path, "");
  CtrClient ctr(proc, std::chrono::seconds(5));
  REQUIRE(ctr.import_file(path, "nvidia/k8s-device-plugin"));
  CHECK(proc.calls() ==
        std::vector<std::string>{std::string(kImport) + " " + path});
}

TEST_CASE("ctr import: a failed import ends its progress as failed",
          "[progress][ctr]") {
  TempDir tmp;
  const std::string path = write_archive(tmp, 1000);
  ScriptedRunner proc;
  proc.script(std::string(kImport) + " -", "", 1);
  CtrClient ctr(proc, std::chrono::seconds(5));
  Recorded progress;
  ctr.set_progress(progress);
  auto r = ctr.import_file(path, "nvidia/k8s-device-plugin");
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK(progress.finishes == 1);
  CHECK_FALSE(progress.ok);

  // An archive that cannot be read: refused before ctr runs at all.
  ScriptedRunner none;
  CtrClient nothing(none, std::chrono::seconds(5));
  nothing.set_progress(progress);
  auto missing = nothing.import_file(tmp.path() + "/absent.tar",
                                     "nvidia/k8s-device-plugin");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().exit == ExitCode::kBlocked);
  CHECK_THAT(missing.error().message, Catch::Contains("absent.tar"));
  CHECK(none.calls().empty());
  CHECK(progress.starts == 1);  // only the first import's
}

TEST_CASE("ctr import_stream: counts the chunks, total as given",
          "[progress][ctr]") {
  ScriptedRunner proc;
  proc.script(std::string(kImport) + " -", "");
  CtrClient ctr(proc, std::chrono::seconds(5));
  Recorded progress;
  ctr.set_progress(progress);
  int left = 3;
  const std::string chunk(1000, 'y');
  auto source = [&]() -> Result<std::string_view> {
    if (left-- > 0) return std::string_view(chunk);
    return std::string_view();
  };
  REQUIRE(ctr.import_stream(source, "nvidia/k8s-device-plugin"));
  CHECK(progress.total == 0);  // decompressed on the fly: not known
  CHECK(progress.added == 3000);
  CHECK(progress.ok);
}
