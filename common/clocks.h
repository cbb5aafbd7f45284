// common/clocks.h: what the GPU's clocks were doing when a time was measured, and whether that time
// can be trusted.
//
// Host-only (env.cuh reads NVML and fills a Sample; the unit tests decode made-up bit masks).
// Why it exists: we met an H100 whose HW power brake was on. Its bf16 GEMM ran at 134 TFLOP/s instead
// of about 780, and every ratio measured on it was meaningless. The brake, HW thermal slowdown and the
// HW slowdown bit that accompanies them cut the clocks by 2x or more; a benchmark row measured under
// them is marked unreliable. SW power cap is the normal state of a GPU under full load (boost stops
// at the power limit): it is recorded, never flagged.
//
//   clocks::Sample s;  s.sm_mhz = ...; s.reasons = bits; s.reasons_known = true;
//   json::Value v = clocks::to_json(s);   // {sm_mhz, mem_mhz, power_w, reasons: [...], hw_slowdown,
//                                         //  hw_power_brake, thermal, sw_power_cap, unreliable}
//   clocks::unreliable(bits)              // "" or e.g. "HW power brake active"
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "json.h"

namespace clocks {

// nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*) from nvml.h: the bits of
// nvmlDeviceGetCurrentClocksEventReasons / nvmlDeviceGetCurrentClocksThrottleReasons.
enum Reason : uint64_t {
  kGpuIdle = 0x1,
  kApplicationsClocks = 0x2,
  kSwPowerCap = 0x4,
  kHwSlowdown = 0x8,
  kSyncBoost = 0x10,
  kSwThermal = 0x20,
  kHwThermal = 0x40,
  kHwPowerBrake = 0x80,
  kDisplayClocks = 0x100,
};

// The readable name of every set bit, lowest first; a bit nvml.h does not define is named by its value.
inline std::vector<std::string> reason_names(uint64_t bits) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {kGpuIdle, "GPU idle"},
      {kApplicationsClocks, "applications clocks setting"},
      {kSwPowerCap, "SW power cap"},
      {kHwSlowdown, "HW slowdown"},
      {kSyncBoost, "sync boost"},
      {kSwThermal, "SW thermal slowdown"},
      {kHwThermal, "HW thermal slowdown"},
      {kHwPowerBrake, "HW power brake"},
      {kDisplayClocks, "display clock setting"},
  };
  std::vector<std::string> names;
  uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (bits & bit) names.push_back(name);
  }
  for (int b = 0; b < 64; ++b) {
    const uint64_t bit = uint64_t(1) << b;
    if ((bits & bit) && !(known & bit)) {
      char s[40];
      std::snprintf(s, sizeof s, "unknown reason 0x%llx", (unsigned long long)bit);
      names.push_back(s);
    }
  }
  return names;
}

// Why timings taken under these bits cannot be trusted, or "" when they can. The HW slowdown bit is
// set together with the brake or HW thermal, so the specific cause is named when there is one.
inline std::string unreliable(uint64_t bits) {
  std::string why;
  if (bits & kHwPowerBrake) why = "HW power brake";
  if (bits & kHwThermal) why += std::string(why.empty() ? "" : " and ") + "HW thermal slowdown";
  if (why.empty() && (bits & kHwSlowdown)) why = "HW slowdown";
  return why.empty() ? why : why + " active";
}

// One reading. Negative clocks, a NaN power or reasons_known == false: NVML could not say.
struct Sample {
  long sm_mhz = -1, mem_mhz = -1;
  double power_w = NAN;
  bool reasons_known = false;
  uint64_t reasons = 0;
};

// Only what is known is written: a field NVML could not read is absent, not a made-up value.
inline json::Value to_json(const Sample& s) {
  json::Value v = json::Value::object();
  if (s.sm_mhz >= 0) v["sm_mhz"] = s.sm_mhz;
  if (s.mem_mhz >= 0) v["mem_mhz"] = s.mem_mhz;
  if (std::isfinite(s.power_w)) v["power_w"] = s.power_w;
  if (!s.reasons_known) return v;
  json::Value names = json::Value::array();
  for (const std::string& n : reason_names(s.reasons)) names.push(n);
  v["reasons"] = names;
  v["reasons_bits"] = (unsigned long long)s.reasons;
  v["hw_slowdown"] = (s.reasons & kHwSlowdown) != 0;
  v["hw_power_brake"] = (s.reasons & kHwPowerBrake) != 0;
  v["thermal"] = (s.reasons & (kSwThermal | kHwThermal)) != 0;
  v["sw_power_cap"] = (s.reasons & kSwPowerCap) != 0;
  v["unreliable"] = unreliable(s.reasons);  // results::Results reads this key
  return v;
}

}  // namespace clocks
