// Link emulation: an alpha-beta (latency + bandwidth) model of a network link. When enabled, the
// comm worker sleeps until start + modelled time before completing a call, so a laptop's loopback
// behaves like a slower (or faster-looking) interconnect without burning CPU.
#pragma once

#include <cstdint>
#include <string>

#include "engine/comm/op.h"

namespace tpsp::comm {

/// Latency + bandwidth model of one link. Disabled (bandwidth 0) by default.
/// Modelled time of a call = steps * latency + wire_bytes / bandwidth (see cost_model.h), so the
/// bus bandwidth nccl-tests would report equals `bandwidth_Bps` for large messages.
struct LinkModel {
  std::string name = "off";    ///< "nvlink", "pcie", "ib", "2GB/s", or "off".
  double latency_s = 0.0;      ///< Per-step latency (seconds).
  double bandwidth_Bps = 0.0;  ///< Per-direction bandwidth (bytes/second); 0 = emulation off.

  bool enabled() const { return bandwidth_Bps > 0.0; }

  /// Modelled duration (seconds) of `op` on `tensor_bytes` in a group of `n` as seen by `rank`.
  double seconds(OpKind op, int n, uint64_t tensor_bytes, int rank = 0, int root = 0) const;

  /// Parses a link spec:
  ///   "off" / ""                  no emulation
  ///   "nvlink"                    150 GB/s, 5 us   (per-direction NVLink bus bandwidth, A100-class)
  ///   "pcie"                      24 GB/s, 10 us   (PCIe 4.0 x16 achievable)
  ///   "ib"                        24 GB/s, 5 us    (InfiniBand HDR 200 Gb/s)
  ///   "<x>GB/s" / "<x>MB/s"       that bandwidth (decimal units), latency 10 us
  ///   any of the above followed by ",<y>us" or ",<y>ms" overrides the latency, e.g. "2GB/s,50us".
  /// Throws tpsp::ShapeError naming the spec if it cannot be parsed.
  static LinkModel parse(const std::string& spec);
};

}  // namespace tpsp::comm
