// --device and --backend (device_runtime.h).
#include "engine/runtime/device_runtime.h"

#include <cstdlib>
#include <filesystem>

#include "engine/comm/env.h"
#include "engine/emulated_device.h"
#include "engine/error.h"
#ifdef TPSP_HAVE_CUDA
#include "engine/comm/cuda/host_staged_backend.h"
#include "engine/ops/cuda/cuda_ops.h"
#endif
#ifdef TPSP_HAVE_NCCL
#include "engine/comm/nccl/nccl_backend.h"
#endif

namespace tpsp::runtime {
namespace {

/// "this is the CPU build of tpsp-train; its GPU build is tpsp-train-cuda beside it (...)".
[[maybe_unused]] std::string cpu_build_of() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string name = ec ? std::string("this program") : exe.filename().string();
  return "this is the CPU build of " + name + "; its GPU build is " + name +
         "-cuda beside it (loading the CUDA libraries costs a process about a second, so only that build "
         "links them)";
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// A host transport that also takes emulated "cuda" tensors: their storage is host memory, so the
/// inner backend moves their bytes in place, at the untagged addresses. Everything else is the inner
/// backend's.
class EmulatedDeviceBackend final : public comm::Backend {
 public:
  explicit EmulatedDeviceBackend(std::unique_ptr<comm::Backend> inner)
      : inner_(std::move(inner)), name_(std::string("cuda-emulated-over-") + inner_->name()) {}
  const char* name() const override { return name_.c_str(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool accepts(Device device) const override { return device == Device::cpu || device == Device::cuda; }
  void all_reduce(float* buf, std::size_t count, comm::ReduceOp op, const comm::TransportCall& c) override {
    inner_->all_reduce(static_cast<float*>(emulated::untag(buf)), count, op, c);
  }
  void all_gather(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override {
    inner_->all_gather(emulated::untag(in), emulated::untag(out), bytes, c);
  }
  void reduce_scatter(const float* in, float* out, std::size_t count, comm::ReduceOp op,
                      const comm::TransportCall& c) override {
    inner_->reduce_scatter(static_cast<const float*>(emulated::untag(in)),
                           static_cast<float*>(emulated::untag(out)), count, op, c);
  }
  void all_to_all(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override {
    inner_->all_to_all(emulated::untag(in), emulated::untag(out), bytes, c);
  }
  void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                    const std::vector<std::size_t>& recv_bytes, const comm::TransportCall& c) override {
    inner_->all_to_all_v(emulated::untag(in), send_bytes, emulated::untag(out), recv_bytes, c);
  }
  void broadcast(void* buf, std::size_t bytes, int root, const comm::TransportCall& c) override {
    inner_->broadcast(emulated::untag(buf), bytes, root, c);
  }
  void barrier(const comm::TransportCall& c) override { inner_->barrier(c); }
  std::unique_ptr<comm::PendingP2P> send(const void* buf, std::size_t bytes, int dst) override {
    return inner_->send(emulated::untag(buf), bytes, dst);
  }
  std::unique_ptr<comm::PendingP2P> recv(void* buf, std::size_t bytes, int src) override {
    return inner_->recv(emulated::untag(buf), bytes, src);
  }
  std::unique_ptr<comm::Backend> new_group(const std::vector<int>& members, const std::string& key,
                                           std::chrono::milliseconds timeout) override {
    std::unique_ptr<comm::Backend> child = inner_->new_group(members, key, timeout);
    return child ? std::make_unique<EmulatedDeviceBackend>(std::move(child)) : nullptr;
  }
  void abort() noexcept override { inner_->abort(); }
  comm::Backend* inner() override { return inner_.get(); }

 private:
  std::unique_ptr<comm::Backend> inner_;
  std::string name_;
};

/// The world over NCCL: the ncclUniqueId travels over the usual host transport, which then closes.
std::shared_ptr<comm::ProcessGroup> nccl_world_from_env([[maybe_unused]] const comm::GroupOptions& o) {
#ifdef TPSP_HAVE_NCCL
  std::unique_ptr<comm::Backend> bootstrap = comm::cpu_backend_from_env(o);
  return comm::ProcessGroup::create_world(cuda::nccl_world(*bootstrap, o.timeout), o);
#elif defined(TPSP_GPU_BUILD_BESIDE)
  TPSP_CHECK(false, "--backend nccl: ", cpu_build_of());
  return nullptr;
#else
  TPSP_CHECK(false, "--backend nccl: this build has no NCCL (",
             gpu_backend_built() ? "nccl.h or libnccl was not found beside the CUDA toolkit"
                                 : "no GPU backend: nvcc was not found when it was configured",
             "); use --backend gloo");
  return nullptr;
#endif
}

}  // namespace

const char* device_choice_name(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::cpu:
      return "cpu";
    case DeviceChoice::cuda:
      return "cuda";
    case DeviceChoice::cuda_emulated:
      return "cuda-emulated";
  }
  return "?";
}

DeviceChoice parse_device(const std::string& name) {
  if (name == "cpu") return DeviceChoice::cpu;
  if (name == "cuda") return DeviceChoice::cuda;
  if (name == "cuda-emulated") return DeviceChoice::cuda_emulated;
  TPSP_CHECK(false, "device '", name, "' is not one of cpu, cuda, cuda-emulated");
  return DeviceChoice::cpu;
}

DeviceChoice device_from_env() {
  return parse_device(env_or("TPSP_DEVICE", "cpu"));
}

const char* default_backend() {
  return TPSP_WITH_GLOO ? "gloo" : "relay";
}

std::string backend_from_env() {
  return env_or("TPSP_BACKEND", default_backend());
}

bool gpu_backend_built() {
#ifdef TPSP_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool nccl_built() {
#ifdef TPSP_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

Device activate(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::cpu:
      return Device::cpu;
    case DeviceChoice::cuda_emulated:
      emulated::register_cuda();
      return Device::cuda;
    case DeviceChoice::cuda: {
      TPSP_CHECK(!emulated::is_registered(),
                 "--device cuda: this process already uses the emulated device (cuda-emulated)");
#ifdef TPSP_HAVE_CUDA
      std::string why;
      const int n = cuda::device_count(&why);
      TPSP_CHECK(n > 0, "--device cuda: no CUDA device is visible (", why,
                 "); use --device cpu, or --device cuda-emulated to check the device paths without a GPU");
      cuda::register_backend(comm::local_rank() % n);
      return Device::cuda;
#elif defined(TPSP_GPU_BUILD_BESIDE)
      TPSP_CHECK(false, "--device cuda: ", cpu_build_of());
      return Device::cpu;
#else
      TPSP_CHECK(
          false,
          "--device cuda: this build has no GPU backend (it was configured with -DTPSP_WITH_CUDA=OFF, or "
          "where nvcc was not found: configure a build where the CUDA toolkit is), or use --device "
          "cuda-emulated");
      return Device::cpu;
#endif
    }
  }
  return Device::cpu;
}

std::shared_ptr<comm::ProcessGroup> init_world(DeviceChoice d, const std::string& backend) {
  const comm::GroupOptions o = comm::options_from_env();
  if (backend == "nccl") {
    TPSP_CHECK(d == DeviceChoice::cuda,
               "--backend nccl needs --device cuda (nccl moves GPU memory only; got --device ",
               device_choice_name(d), ")");
    TPSP_CHECK(std::getenv("TPSP_RELAY_FD") == nullptr,
               "--backend nccl: the ranks were started through a relay (TPSP_RELAY_FD is set), which must "
               "carry every byte; start them without it (tpsp-run --backend gloo, ./check --backend nccl)");
    return nccl_world_from_env(o);
  }
  TPSP_CHECK(backend == "gloo" || backend == "relay", "backend '", backend,
             "' is not one of gloo, relay, nccl");
  TPSP_CHECK(
      backend != "relay" || std::getenv("TPSP_RELAY_FD") != nullptr,
      "--backend relay: TPSP_RELAY_FD is not set; start the ranks with tpsp-run --backend relay, which "
      "hands each rank the relay's socket");
  switch (d) {
    case DeviceChoice::cpu:
      return comm::init_from_env(o);
    case DeviceChoice::cuda_emulated:
      return comm::ProcessGroup::create_world(
          std::make_unique<EmulatedDeviceBackend>(comm::cpu_backend_from_env(o)), o);
    case DeviceChoice::cuda:
#ifdef TPSP_HAVE_CUDA
      return comm::ProcessGroup::create_world(cuda::host_staged(comm::cpu_backend_from_env(o)), o);
#else
      break;
#endif
  }
  TPSP_CHECK(false, "--device ", device_choice_name(d), ": this build has no GPU backend");
  return nullptr;
}

}  // namespace tpsp::runtime
