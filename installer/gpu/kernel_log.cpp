// Xid lines as the NVIDIA kernel module prints them (NVIDIA, "XID Errors",
// docs.nvidia.com/deploy/xid-errors): "NVRM: Xid (PCI:0000:3b:00): 79,
// pid=..., GPU has fallen off the bus."; drivers before R450 printed the
// address without "PCI:" ("NVRM: Xid (0000:01:00): 3, ...").
#include "gpu/kernel_log.hpp"

#include <cstdint>
#include <optional>
#include <utility>

#include "gpunode/terminal_text.hpp"

namespace gpunode {
namespace {

constexpr std::string_view kMarker = "NVRM: Xid (";

std::optional<int> leading_number(std::string_view& s) {
  std::size_t i = 0;
  int n = 0;
  while (i < s.size() && i < 6 && s[i] >= '0' && s[i] <= '9') {
    n = n * 10 + (s[i] - '0');
    ++i;
  }
  if (i == 0 || (i < s.size() && s[i] >= '0' && s[i] <= '9')) {
    return std::nullopt;  // no number, or one too long to be an Xid
  }
  s.remove_prefix(i);
  return n;
}

std::optional<XidEvent> parse_line(std::string_view line) {
  const std::size_t at = line.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + kMarker.size());
  const std::size_t close = rest.find("): ");
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view pci = rest.substr(0, close);
  if (pci.substr(0, 4) == "PCI:") pci.remove_prefix(4);
  if (pci.empty()) return std::nullopt;
  rest.remove_prefix(close + 3);
  const auto code = leading_number(rest);
  if (!code) return std::nullopt;
  if (!rest.empty() && rest.front() != ',') return std::nullopt;
  if (!rest.empty()) rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == '\r') rest.remove_suffix(1);
  // The log is untrusted text: whatever wrote to it could have put an ESC
  // sequence there.
  return XidEvent{terminal_safe(pci), *code, terminal_safe(rest)};
}

// A hexadecimal field of a PCI address, or nothing.
std::optional<std::uint32_t> hex(std::string_view s) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  std::uint32_t n = 0;
  for (char c : s) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) return std::nullopt;
    n = n * 16 + static_cast<std::uint32_t>(digit);
  }
  return n;
}

struct PciAddress {
  std::uint32_t domain, bus, device;
  bool operator==(const PciAddress& o) const {
    return domain == o.domain && bus == o.bus && device == o.device;
  }
};

// "domain:bus:device" with an optional ".function", which is dropped: an
// Xid line names the device only.
std::optional<PciAddress> pci_address(std::string_view s) {
  const std::size_t first = s.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const std::size_t second = s.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  std::string_view device = s.substr(second + 1);
  device = device.substr(0, device.find('.'));
  const auto d = hex(s.substr(0, first));
  const auto b = hex(s.substr(first + 1, second - first - 1));
  const auto v = hex(device);
  if (!d || !b || !v) return std::nullopt;
  return PciAddress{*d, *b, *v};
}

}  // namespace

// dmesg, not journalctl: the NVIDIA module writes Xid lines to the kernel
// ring buffer, and dmesg reads that buffer on every host, while journald is
// absent from minimal images and containers (the lent H200 had no
// systemd) and may not keep kernel messages. The price: the ring buffer
// can wrap on a long uptime, dropping early Xid lines.
std::vector<std::string> kernel_log_argv() { return {"dmesg"}; }

std::vector<XidEvent> parse_xid_events(std::string_view kernel_log) {
  std::vector<XidEvent> events;
  while (!kernel_log.empty()) {
    const std::size_t end = kernel_log.find('\n');
    if (auto event = parse_line(kernel_log.substr(0, end))) {
      events.push_back(std::move(*event));
    }
    kernel_log.remove_prefix(end == std::string_view::npos ? kernel_log.size()
                                                           : end + 1);
  }
  return events;
}

// NVIDIA's descriptions, from the "XID Errors" table
// (docs.nvidia.com/deploy/xid-errors), for the codes seen on data-centre
// GPUs.
const char* xid_meaning(int code) {
  switch (code) {
    case 13:
      return "Graphics Engine Exception";
    case 31:
      return "GPU memory page fault";
    case 32:
      return "Invalid or corrupted push buffer stream";
    case 38:
      return "Driver firmware error";
    case 43:
      return "GPU stopped processing";
    case 45:
      return "Preemptive cleanup, due to previous errors";
    case 48:
      return "Double Bit ECC Error";
    case 61:
      return "Internal micro-controller breakpoint/warning";
    case 62:
      return "Internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recording event";
    case 64:
      return "ECC page retirement or row remapper recording failure";
    case 68:
      return "NVDEC0 Exception";
    case 69:
      return "Graphics Engine class error";
    case 74:
      return "NVLINK Error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "High single-bit ECC error rate";
    case 94:
      return "Contained ECC error";
    case 95:
      return "Uncontained ECC error";
    case 109:
      return "Context Switch Timeout Error";
    case 119:
      return "GSP RPC Timeout";
    case 120:
      return "GSP Error";
    case 121:
      return "C2C Link Error";
    case 140:
      return "Unrecovered ECC Error";
  }
  return nullptr;
}

bool xid_names_gpu(const std::string& xid_pci, const std::string& bus_id) {
  const auto a = pci_address(xid_pci);
  const auto b = pci_address(bus_id);
  return a && b && *a == *b;
}

}  // namespace gpunode
