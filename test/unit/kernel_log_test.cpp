// The kernel log's Xid lines (NVIDIA, "XID Errors"): the real H200 log,
// the derived logs of test/fixtures/gpu/derived, other log formats, junk,
// and matching an Xid's PCI address to NVML's bus id.
#include "gpu/kernel_log.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "test_support.hpp"

namespace gpunode {
namespace {

std::vector<XidEvent> parse_fixture(const std::string& relative) {
  const std::string text = test::read_text(test::fixture(relative));
  REQUIRE_FALSE(text.empty());
  return parse_xid_events(text);
}

TEST_CASE("the kernel log is read with plain dmesg", "[health]") {
  CHECK(kernel_log_argv() == std::vector<std::string>{"dmesg"});
}

TEST_CASE("the real H200's NVRM lines hold no Xid", "[health]") {
  const std::string text =
      test::read_text(test::fixture("gpu/h200-580.159.04/dmesg-nvrm.txt"));
  REQUIRE(text.find("NVRM:") != std::string::npos);
  CHECK(parse_xid_events(text).empty());
}

TEST_CASE("derived kernel logs: every Xid line, in order", "[health]") {
  struct Case {
    const char* file;
    std::vector<int> codes;
    const char* pci;
  };
  const Case cases[] = {
      {"dmesg-xid-79.txt", {79}, "0000:38:00"},
      {"dmesg-xid-48.txt", {48, 63}, "0000:18:00"},
      {"dmesg-xid-94-95.txt", {94, 95}, "0000:28:00"},
      {"dmesg-xid-63-64.txt", {63, 64}, "0000:48:00"},
      {"dmesg-xid-119.txt", {119}, "0000:98:00"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.file) {
      auto events = parse_fixture(std::string("gpu/derived/") + c.file);
      REQUIRE(events.size() == c.codes.size());
      for (std::size_t i = 0; i < events.size(); ++i) {
        CHECK(events[i].code == c.codes[i]);
        CHECK(xid_meaning(events[i].code) != nullptr);
      }
      CHECK(events[0].pci == c.pci);
    }
  }
}

TEST_CASE("an Xid event's text is the rest of its line", "[health]") {
  auto events = parse_fixture("gpu/derived/dmesg-xid-79.txt");
  REQUIRE(events.size() == 1);
  CHECK(events[0].text ==
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
  CHECK(std::string(xid_meaning(79)) == "GPU has fallen off the bus");
}

TEST_CASE("Xid lines under journalctl's prefix, none, and the old format",
          "[health]") {
  const std::string log =
      "Dec 01 19:44:40 node kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=7, "
      "Graphics Exception\n"
      "NVRM: Xid (PCI:0000:3B:00): 31, pid=8, name=a.out, MMU Fault\n"
      "[  269.517039] NVRM: Xid (0000:01:00): 43, Ch 00000010\n"
      "NVRM: Xid (PCI:0000:3b:00): 45\n";
  auto events = parse_xid_events(log);
  REQUIRE(events.size() == 4);
  CHECK(events[0].code == 13);
  CHECK(events[0].pci == "0000:3b:00");
  CHECK(events[0].text == "pid=7, Graphics Exception");
  CHECK(events[1].code == 31);
  CHECK(events[2].pci == "0000:01:00");
  CHECK(events[2].code == 43);
  CHECK(events[3].code == 45);
  CHECK(events[3].text.empty());
}

TEST_CASE("malformed Xid lines are skipped", "[health]") {
  const std::string log =
      "NVRM: Xid (PCI:0000:3b:00) 79, no colon after the address\n"
      "NVRM: Xid (PCI:0000:3b:00): , no code\n"
      "NVRM: Xid (PCI:0000:3b:00): 79x, letters after the code\n"
      "NVRM: Xid (PCI:0000:3b:00): 12345678, too long a code\n"
      "NVRM: Xid (): 79, no address\n"
      "NVRM: Xid (PCI:0000:3b:00\n"
      "kernel: Xid 79 mentioned by someone else\n"
      "\xff\xfe\x01 junk\n";
  CHECK(parse_xid_events(log).empty());
}

TEST_CASE("control characters in an Xid line are escaped", "[health]") {
  const std::string log =
      "NVRM: Xid (PCI:0000:3b\x1b[2J:00): 79, pid=1, \x1b]0;owned\x07 bus\r\n";
  auto events = parse_xid_events(log);
  REQUIRE(events.size() == 1);
  CHECK(events[0].text.find('\x1b') == std::string::npos);
  CHECK(events[0].text.find('\x07') == std::string::npos);
  CHECK(events[0].text == "pid=1, \\e]0;owned\\x07 bus");
  CHECK(events[0].pci == "0000:3b\\e[2J:00");
}

TEST_CASE("Xid codes outside gpunode's table have no meaning", "[health]") {
  CHECK(xid_meaning(0) == nullptr);
  CHECK(xid_meaning(-1) == nullptr);
  CHECK(xid_meaning(100000) == nullptr);
  CHECK(std::string(xid_meaning(48)) == "Double Bit ECC Error");
  CHECK(std::string(xid_meaning(119)) == "GSP RPC Timeout");
}

TEST_CASE("xid_names_gpu compares domain, bus and device", "[health]") {
  CHECK(xid_names_gpu("0000:3b:00", "00000000:3B:00.0"));
  CHECK(xid_names_gpu("0000:00:06", "00000000:00:06.0"));
  CHECK(xid_names_gpu("0001:3B:00", "00000001:3b:00.0"));
  CHECK_FALSE(xid_names_gpu("0000:3b:00", "00000000:3C:00.0"));
  CHECK_FALSE(xid_names_gpu("0000:3b:00", "00000001:3B:00.0"));
  CHECK_FALSE(xid_names_gpu("0000:3b:01", "00000000:3B:00.0"));
  CHECK_FALSE(xid_names_gpu("", "00000000:3B:00.0"));
  CHECK_FALSE(xid_names_gpu("0000:3b:00", ""));
  CHECK_FALSE(xid_names_gpu("0000:3g:00", "00000000:3G:00.0"));
  CHECK_FALSE(xid_names_gpu("3b:00", "3b:00"));
}

TEST_CASE("the simulated dmesg: the real log, or the one named", "[health]") {
  test::Run plain = test::run_with_sim({"dmesg"});
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find("NVRM: loading NVIDIA") != std::string::npos);
  CHECK(parse_xid_events(plain.out).empty());
  test::Run xid = test::run_with_sim(
      {"dmesg"}, {"GPUNODE_SIM_KERNEL_LOG=" +
                  test::fixture("gpu/derived/dmesg-xid-94-95.txt")});
  REQUIRE(xid.exit_code == 0);
  auto events = parse_xid_events(xid.out);
  REQUIRE(events.size() == 2);
  CHECK(xid_names_gpu(events[1].pci, "00000000:58:00.0"));
}

}  // namespace
}  // namespace gpunode
