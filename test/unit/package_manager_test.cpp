// The package manager seam of the toolkit stage (host/package_manager.hpp):
// which family a host tree has, the query and install argv, and how the
// recorded answers of dpkg-query and rpm -q read.
#include "host/package_manager.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

#include "gpunode/system_host.hpp"
#include "scripted_runner.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::ScriptedRunner;
using gpunode::test::TempDir;
using gpunode::test::write_text;

namespace {

const std::vector<std::string> kNames = {"nvidia-container-toolkit",
                                         "libnvidia-container1"};

PackageManager detect_in(const std::string& root) {
  return detect_package_manager(*make_rooted_file_system(root));
}

}  // namespace

TEST_CASE(
    "package manager: the family comes from its database, os-release "
    "breaks a tie",
    "[unit][packages]") {
  TempDir t;
  const std::string root = t.path();
  CHECK(detect_in(root).family.empty());

  std::filesystem::create_directories(root + "/var/lib/rpm");
  CHECK(detect_in(root).family == "rpm");
  CHECK(detect_in(root).db == "/var/lib/rpm");
  std::filesystem::create_directories(root + "/usr/lib/sysimage/rpm");
  CHECK(detect_in(root).db == "/usr/lib/sysimage/rpm");

  // rpm installed on a Debian host: dpkg still manages the system.
  write_text(root + "/var/lib/dpkg/status", "");
  write_text(root + "/etc/os-release", "ID=ubuntu\nID_LIKE=debian\n");
  CHECK(detect_in(root).family == "deb");
  CHECK(detect_in(root).os_text() == "ubuntu (like debian)");
  write_text(root + "/etc/os-release",
             "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n");
  CHECK(detect_in(root).family == "rpm");
}

TEST_CASE("package manager: argv under --root and at /", "[unit][packages]") {
  PackageManager deb{"deb", "/var/lib/dpkg", "", ""};
  PackageManager rpm{"rpm", "/var/lib/rpm", "", ""};
  const std::vector<std::string> files = {"/usb/a.deb", "/usb/b.deb"};
  CHECK(install_argv(deb, "/", files, true) ==
        std::vector<std::string>{"dpkg", "-i", "/usb/a.deb", "/usb/b.deb"});
  CHECK(install_argv(deb, "/t", files, false) ==
        std::vector<std::string>{"dpkg", "--root=/t", "-i", "/usb/a.deb",
                                 "/usb/b.deb"});
  CHECK(install_argv(rpm, "/t", {"/usb/a.rpm"}, true) ==
        std::vector<std::string>{"rpm", "--root", "/t", "--dbpath",
                                 "/var/lib/rpm", "-U", "--nomanifest",
                                 "--oldpackage", "/usb/a.rpm"});
  CHECK(query_argv(deb, "/t", kNames)[1] == "--admindir=/t/var/lib/dpkg");
  CHECK(query_argv(rpm, "/", kNames)[1] == "--dbpath");
}

TEST_CASE("package manager: dpkg-query and rpm -q answers read",
          "[unit][packages]") {
  // dpkg-query: a removed package with its config left ("rc") is not
  // installed; an unknown one is only named on stderr.
  auto deb = parse_query("deb",
                         "nvidia-container-toolkit 1.17.8-1 ii \n"
                         "libnvidia-container1 1.16.2-1 rc \n",
                         kNames);
  CHECK(deb.versions.at("nvidia-container-toolkit") ==
        std::optional<std::string>("1.17.8-1"));
  CHECK(deb.versions.at("libnvidia-container1") == std::nullopt);
  auto rpm = parse_query("rpm",
                         "nvidia-container-toolkit 1.17.8-1\n"
                         "package libnvidia-container1 is not installed\n",
                         kNames);
  CHECK(rpm.versions.at("nvidia-container-toolkit") ==
        std::optional<std::string>("1.17.8-1"));
  CHECK(rpm.versions.at("libnvidia-container1") == std::nullopt);
}

TEST_CASE(
    "package manager: a query that did not run is blocked, one that "
    "found nothing is an answer",
    "[unit][packages]") {
  PackageManager rpm{"rpm", "/var/lib/rpm", "", ""};
  ScriptedRunner proc;
  const auto argv = query_argv(rpm, "/", kNames);
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  proc.script(joined,
              "package nvidia-container-toolkit is not installed\n"
              "package libnvidia-container1 is not installed\n",
              2);
  auto none =
      installed_versions(proc, rpm, "/", kNames, std::chrono::seconds(1));
  REQUIRE(none);
  CHECK(none->versions.at("nvidia-container-toolkit") == std::nullopt);

  // A database rpm cannot open: exit 1, as for one name not installed, but
  // no name answered on stdout.
  ScriptedRunner broken;
  ProcessResult no_db;
  no_db.exit_code = 1;
  no_db.err =
      "error: cannot open Packages database in /var/lib/rpm\n"
      "error: cannot open Packages database in /var/lib/rpm\n";
  broken.script(joined, no_db);
  auto unanswered =
      installed_versions(broken, rpm, "/", kNames, std::chrono::seconds(1));
  REQUIRE_FALSE(unanswered);
  CHECK(unanswered.error().exit == ExitCode::kBlocked);
  CHECK_THAT(unanswered.error().message, Catch::Contains("cannot ask rpm"));

  ScriptedRunner missing;  // rpm not on PATH
  auto r =
      installed_versions(missing, rpm, "/", kNames, std::chrono::seconds(1));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK_THAT(r.error().message, Catch::Contains("cannot ask rpm"));
}

TEST_CASE(
    "package manager: dpkg-query's exit 2 is a failure (an unreadable "
    "database), not four packages missing",
    "[unit][packages]") {
  PackageManager deb{"deb", "/var/lib/dpkg", "debian", ""};
  const auto argv = query_argv(deb, "/", kNames);
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  ScriptedRunner unreadable;
  ProcessResult failed;
  failed.exit_code = 2;
  failed.err =
      "dpkg-query: error: cannot open package info file "
      "'/var/lib/dpkg/status' for reading: Permission denied\n";
  unreadable.script(joined, failed);
  auto r =
      installed_versions(unreadable, deb, "/", kNames, std::chrono::seconds(1));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK_THAT(r.error().message, Catch::Contains("cannot ask dpkg-query"));
  // Exit 1 with some names unknown is an answer.
  ScriptedRunner some;
  some.script(joined, "nvidia-container-toolkit 1.17.8-1 ii \n", 1);
  auto found =
      installed_versions(some, deb, "/", kNames, std::chrono::seconds(1));
  REQUIRE(found);
  CHECK(found->versions.at("nvidia-container-toolkit") ==
        std::optional<std::string>("1.17.8-1"));
  CHECK(found->versions.at("libnvidia-container1") == std::nullopt);
}

TEST_CASE(
    "package manager: packages dpkg left half-way are unfinished, not "
    "installed",
    "[unit][packages]") {
  // What a dpkg killed while configuring leaves (dpkg-query(1), --list):
  // unpacked, half-configured, half-installed with reinst-required.
  const std::vector<std::string> four = {
      "nvidia-container-toolkit", "nvidia-container-toolkit-base",
      "libnvidia-container-tools", "libnvidia-container1"};
  auto q = parse_query("deb",
                       "nvidia-container-toolkit 1.17.8-1 iU \n"
                       "nvidia-container-toolkit-base 1.17.8-1 iF \n"
                       "libnvidia-container-tools 1.17.8-1 iHR\n"
                       "libnvidia-container1 1.17.8-1 ii \n",
                       four);
  CHECK(q.versions.at("nvidia-container-toolkit") == std::nullopt);
  CHECK(q.versions.at("nvidia-container-toolkit-base") == std::nullopt);
  CHECK(q.versions.at("libnvidia-container-tools") == std::nullopt);
  CHECK(q.versions.at("libnvidia-container1") ==
        std::optional<std::string>("1.17.8-1"));
  REQUIRE(q.unfinished.size() == 3);
  CHECK(q.unfinished.at("nvidia-container-toolkit").state == "iU");
  CHECK(q.unfinished.at("nvidia-container-toolkit").version == "1.17.8-1");
  CHECK(q.unfinished.at("libnvidia-container-tools").state == "iHR");
  CHECK(unfinished_state_text("iU") == "unpacked but not configured");
  CHECK(unfinished_state_text("iF") == "half-configured");
  CHECK(unfinished_state_text("iHR") == "half-installed, reinstall required");
}
