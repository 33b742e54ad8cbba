// Process groups for <lmfuse/distributed.h>: the handle LossOptions carries, and a store plus a Gloo or
// NCCL group whose collectives time out. LibTorch 1.13's backends are ProcessGroups themselves; from 2.0
// a backend is wrapped into a ProcessGroup that dispatches on the tensors' device.
#include <lmfuse/distributed.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

// A backend is used where LibTorch was built with it and its headers are installed (Debian's libtorch
// needs libgloo-dev for ProcessGroupGloo.hpp; PyTorch's wheels may lack nccl.h).
#if defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
#define LMFUSE_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL) && __has_include(<nccl.h>)
#define LMFUSE_HAVE_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace lmfuse {
namespace {

constexpr const char* kWho = "lmfuse::make_group: ";

c10::intrusive_ptr<c10d::Store> makeStore(const GroupOptions& options) {
  if (!options.store_path.empty()) {
    auto store = c10::make_intrusive<c10d::FileStore>(options.store_path, options.world_size);
    store->setTimeout(options.timeout);
    return store;
  }
  c10d::TCPStoreOptions tcp;
  tcp.port = static_cast<uint16_t>(options.tcp_port);
  tcp.isServer = options.rank == 0;
  tcp.numWorkers = options.world_size;
  tcp.timeout = options.timeout;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", tcp);
}

// From LibTorch 2.0 on, a backend serves a ProcessGroup for one device type.
template <class Backend>
c10::intrusive_ptr<c10d::ProcessGroup> asGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                               const GroupOptions& options, c10::intrusive_ptr<Backend> backend,
                                               c10::DeviceType device) {
#if TORCH_VERSION_MAJOR >= 2
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, options.rank, options.world_size);
  const auto type = options.backend == GroupBackend::Nccl ? c10d::ProcessGroup::BackendType::NCCL
                                                          : c10d::ProcessGroup::BackendType::GLOO;
  group->setDefaultBackend(type);
  group->setBackend(device, type, backend);
  return group;
#else
  (void)store, (void)options, (void)device;
  return backend;
#endif
}

}  // namespace

std::shared_ptr<const ProcessGroupHandle> distributed_group(c10::intrusive_ptr<c10d::ProcessGroup> group) {
  TORCH_CHECK(group, "lmfuse::distributed_group: the process group is null");
  return std::make_shared<const ProcessGroupHandle>(ProcessGroupHandle{std::move(group)});
}

c10::intrusive_ptr<c10d::ProcessGroup> make_group(const GroupOptions& options) {
  TORCH_CHECK(options.world_size >= 1, kWho, "world_size (", options.world_size, ") must be at least 1");
  TORCH_CHECK(options.rank >= 0 && options.rank < options.world_size, kWho, "rank (", options.rank,
              ") is outside [0, ", options.world_size, ")");
  auto store = makeStore(options);
  if (options.backend == GroupBackend::Nccl) {
#ifdef LMFUSE_HAVE_NCCL
    auto nccl = c10d::ProcessGroupNCCL::Options::create();
    nccl->timeout = options.timeout;
    return asGroup(store, options,
                   c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size, nccl),
                   c10::DeviceType::CUDA);
#else
    TORCH_CHECK(false, kWho, "NCCL was asked for, but this LibTorch was built without it (or nccl.h is missing)");
#endif
  }
#ifdef LMFUSE_HAVE_GLOO
  auto gloo = c10d::ProcessGroupGloo::Options::create();
  gloo->timeout = options.timeout;
  gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return asGroup(store, options,
                 c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank, options.world_size, gloo),
                 c10::DeviceType::CPU);
#else
  TORCH_CHECK(false, kWho, "Gloo was asked for, but this LibTorch was built without it (or the gloo headers are missing: libgloo-dev)");
#endif
}

}  // namespace lmfuse
