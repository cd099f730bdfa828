// The Gloo world of one rank: its rendezvous store (a directory, a TCP store served by rank 0, or in
// process for a world of one) and its tcp device, then GlooBackend::connect_world. The environment is
// read by engine/comm/env.cpp, which hands the settings over; only a build with Gloo (TPSP_WITH_GLOO)
// has this file.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "engine/comm/backend.h"

namespace tpsp::comm {

/// Where a Gloo world meets and which address its tcp device binds.
struct GlooRendezvous {
  std::string store_dir;  ///< TPSP_STORE_DIR: a FileStore there (an existing directory), or ""
  std::string
      master_addr;  ///< with master_port: a TCP store served by rank 0 (tcp_store.h), when no store_dir
  int master_port = 0;
  std::string ifname;    ///< TPSP_GLOO_IFNAME: the interface to bind (e.g. eth0), or ""
  std::string hostname;  ///< TPSP_GLOO_HOSTNAME: the address to bind when no ifname ("127.0.0.1")
};

/// Rank `rank` of `size` joins the Gloo world under store key prefix `prefix`. With neither a store
/// directory nor a master address, only a world of one (an in-process store). Throws ShapeError for
/// settings that cannot work (no rendezvous for size > 1, a store_dir that is not a directory, a port
/// outside 1-65535), CommTimeoutError when the rendezvous times out, CommError when the store or the
/// device cannot be set up.
std::unique_ptr<Backend> gloo_world(int rank, int size, const GlooRendezvous& where,
                                    const std::string& prefix, std::chrono::milliseconds timeout);

}  // namespace tpsp::comm
