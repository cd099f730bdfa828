// Choosing where a program computes and how its ranks talk: the `--device` and `--backend` of
// tpsp-train, the demo, the benchmarks and ./check's rank programs, in one place. A library of its
// own (tpsp_runtime) because it links the GPU backend when the build has one, which the engine
// library never does.
//   device  cpu            tensors in host memory, the CPU ops (the default)
//           cuda           tensors on this rank's GPU (LOCAL_RANK modulo the GPUs it sees), the CUDA ops
//           cuda-emulated  "cuda" tensors in host memory with the CPU ops (engine/emulated_device.h):
//                          the device paths without a GPU
//   backend gloo           Gloo over TCP (the default); device tensors are staged through host memory
//                          ("CUDA over Gloo", engine/comm/cuda/host_staged_backend.h), so several ranks
//                          can share one GPU. Under ./check and ./grade the checker's relay replaces
//                          Gloo (engine/comm/env.h), staged the same way.
//           relay          every byte through tpsp-run's relay process (tpsp-run --backend relay, which
//                          hands each rank its socket as TPSP_RELAY_FD): a build without Gloo, or a
//                          machine whose Gloo transport does not work; staged like gloo
//           nccl           NCCL, one communicator per group, one GPU per rank (--device cuda only)
#pragma once

#include <memory>
#include <string>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"

namespace tpsp::runtime {

enum class DeviceChoice { cpu, cuda, cuda_emulated };

/// "cpu", "cuda" or "cuda-emulated".
const char* device_choice_name(DeviceChoice d);
/// The choice named `name`; ShapeError listing the three names otherwise.
DeviceChoice parse_device(const std::string& name);
/// TPSP_DEVICE (./check passes --device to its rank programs this way); unset or empty: cpu.
DeviceChoice device_from_env();
/// TPSP_BACKEND; unset or empty: default_backend().
std::string backend_from_env();

/// "gloo" in a build with Gloo, else "relay" (TPSP_WITH_GLOO=OFF).
const char* default_backend();

/// True when this program links the GPU backend (its -cuda build, where nvcc was found), and NCCL.
bool gpu_backend_built();
bool nccl_built();

/// Makes the device usable in this process and returns where its tensors go (Device::cuda for both
/// cuda choices). cuda: registers the GPU backend on GPU LOCAL_RANK % (GPUs visible). ShapeError when
/// this program is a CPU build (naming its GPU build <program>-cuda beside it: loading the CUDA
/// libraries costs a process about 0.8 s, so ./check's rank programs and tpsp-train have two builds),
/// when the build has no GPU backend at all ("rebuild where nvcc is found"), or when no GPU is visible
/// (naming CUDA's reason); cuda-emulated after cuda in one process (or the reverse) is one too.
Device activate(DeviceChoice d);

/// The world group for `d` and `backend` ("gloo", "relay" or "nccl"), with options from the environment
/// (comm::options_from_env), after activate(d). ShapeError for an unknown backend, relay without
/// TPSP_RELAY_FD ("start the ranks with tpsp-run --backend relay"), nccl without
/// --device cuda ("nccl moves GPU memory only"), nccl in a build without NCCL, nccl under a relay
/// (TPSP_RELAY_FD: the relay must carry every byte), and gloo under a relay ("pass --backend relay");
/// otherwise the errors of
/// comm::init_from_env and of the NCCL rendezvous (CommError naming NCCL's words).
std::shared_ptr<comm::ProcessGroup> init_world(DeviceChoice d, const std::string& backend);

}  // namespace tpsp::runtime
