// What the real H200 of test/fixtures/gpu/h200-580.159.04 reports of its
// health, through NVML or `nvidia-smi -q`: nothing wrong and no fabric.
// One place for it, so the NVML stand-in's default and the -q reading are
// held to the same truth.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>

#include "gpunode/gpu.hpp"

namespace gpunode::test {

inline void check_real_h200_health(const GpuHealth& h) {
  CHECK(h.pci_bus_id == "00000000:00:06.0");
  CHECK(h.minor_number == std::optional<unsigned>(0));
  CHECK(h.persistence_mode == std::optional<bool>(true));
  CHECK(h.fabric == GpuHealth::Fabric::kNotSupported);  // no NVSwitch
  CHECK(h.fabric_status.empty());
  CHECK(h.ecc_uncorrectable_volatile == std::optional<std::uint64_t>(0));
  CHECK(h.ecc_uncorrectable_aggregate == std::optional<std::uint64_t>(0));
  CHECK(h.ecc_mode_enabled == std::optional<bool>(true));
  CHECK(h.ecc_unreadable.empty());
  CHECK(h.ecc_aggregate_unreadable.empty());
  // Hopper has row remapping, not page retirement: "Retired Pages" is N/A.
  CHECK_FALSE(h.retired_pages_pending.has_value());
  CHECK(h.remapping_pending == std::optional<bool>(false));
  CHECK(h.remapping_failed == std::optional<bool>(false));
}

}  // namespace gpunode::test
