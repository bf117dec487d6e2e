// Xid errors from the kernel log. The NVIDIA kernel module reports each GPU
// error as a line "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen
// off the bus." (NVIDIA, "XID Errors", docs.nvidia.com/deploy/xid-errors).
// The device plugin marks a GPU unhealthy on most of them, and allocatable
// then falls short with no word from any layer above.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpunode {

struct XidEvent {
  std::string pci;   // as printed: "0000:3b:00" (domain:bus:device)
  int code = 0;      // the Xid number
  std::string text;  // the rest of the line after "<code>, ", escaped
};

// The argv that prints the kernel log since boot.
std::vector<std::string> kernel_log_argv();

// Every Xid line of `kernel_log`, in order; any other line is ignored.
// Tolerates dmesg's "[    3.72]" prefix, journalctl's "Dec 01 ... kernel:"
// prefix and none; a malformed Xid line is skipped, never an error.
std::vector<XidEvent> parse_xid_events(std::string_view kernel_log);

// NVIDIA's short description of an Xid ("GPU has fallen off the bus" for
// 79), or nullptr when the code is not in gpunode's table.
const char* xid_meaning(int code);

// Does the Xid line's PCI address name the GPU at NVML's bus id
// ("00000000:3B:00.0")? Case and domain width are ignored.
bool xid_names_gpu(const std::string& xid_pci, const std::string& bus_id);

}  // namespace gpunode
