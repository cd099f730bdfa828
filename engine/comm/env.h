// Creating the world group from the environment (torchrun / Slurm conventions).
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace tpsp::comm {

/// Creates the world ProcessGroup (name "world") from the environment:
///  - rank / size: RANK and WORLD_SIZE (torchrun), else SLURM_PROCID and SLURM_NTASKS; neither -> rank 0
///    of 1. LOCAL_RANK / LOCAL_WORLD_SIZE (else SLURM_LOCALID) are read by local_rank() below.
///  - store: a Gloo FileStore in $TPSP_STORE_DIR (a fresh directory per run, made by the launcher);
///    else, when MASTER_ADDR and MASTER_PORT are set, a TCP store served by rank 0 (tcp_store.h);
///    else (world size 1 only) an in-process store. Every context uses its own key prefix, so
///    init_from_env may be called again in the same process.
///  - transport: Gloo tcp on 127.0.0.1, or on TPSP_GLOO_IFNAME (an interface name, e.g. eth0) or
///    TPSP_GLOO_HOSTNAME (an address to bind) when set (Gloo builds only); when TPSP_RELAY_FD names a
///    launcher's relay socket (./check, ./grade, tpsp-run --backend relay), the relay instead
///    (relay/relay_backend.h; no store is used).
///  - options: TPSP_COMM_TIMEOUT (seconds, default 60), TPSP_COMM_FINGERPRINT (0 turns the check off),
///    TPSP_LINK (link emulation, see LinkModel::parse), TPSP_COMM_CHECK_BUFFERS (1: an async call's
///    buffers must not change before its wait(), and its output reads NaN until it completes; ./check
///    sets it).
/// Throws ShapeError on inconsistent variables (rank >= world size, ...) and CommError if the
/// rendezvous fails or times out.
std::shared_ptr<ProcessGroup> init_from_env();

/// Same, with explicit options instead of the TPSP_COMM_* / TPSP_LINK variables.
std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& options);

/// The world's CPU transport alone (Gloo; the relay when TPSP_RELAY_FD is set), from the same
/// variables and with the same errors as init_from_env (which is create_world over it): for a program that
/// wraps it, e.g. CUDA tensors staged over Gloo,
/// ProcessGroup::create_world(cuda::host_staged(cpu_backend_from_env(o)), o)
/// (engine/comm/cuda/host_staged_backend.h). options.timeout bounds the rendezvous.
std::unique_ptr<Backend> cpu_backend_from_env(const GroupOptions& options);

/// Options from TPSP_COMM_TIMEOUT, TPSP_COMM_FINGERPRINT, TPSP_LINK and TPSP_COMM_CHECK_BUFFERS
/// (defaults where unset).
GroupOptions options_from_env();

/// LOCAL_RANK (else SLURM_LOCALID, else 0) and LOCAL_WORLD_SIZE (else 1).
int local_rank();
int local_world_size();

}  // namespace tpsp::comm
