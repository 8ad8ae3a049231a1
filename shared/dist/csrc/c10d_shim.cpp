// A C ABI over libtorch's c10d: TCPStore rendezvous, ProcessGroupGloo (CPU) and, when built
// against the CUDA libtorch, ProcessGroupNCCL. Rust calls these functions with the `at::Tensor*`
// behind `tch::Tensor::as_ptr()`.
//
// Every entry point catches every C++ exception and returns its message (malloc'd, freed by
// runfn_c10d_free_error); no exception may cross into Rust, where it would abort the process.

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef RUNFN_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace {

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::chrono::milliseconds timeout;
};

char* copy_message(const char* what) {
  size_t n = std::strlen(what);
  char* out = static_cast<char*>(std::malloc(n + 1));
  if (out != nullptr) std::memcpy(out, what, n + 1);
  return out;
}

// Runs `body`, turning any exception into an error message for Rust.
template <typename F>
char* guarded(F&& body) {
  try {
    body();
    return nullptr;
  } catch (const c10::Error& e) {
    return copy_message(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return copy_message(e.what());
  } catch (...) {
    return copy_message("unknown C++ exception in c10d");
  }
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::vector<at::Tensor> as_vector(at::Tensor** tensors, int n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) out.push_back(*tensors[i]);
  return out;
}

}  // namespace

extern "C" {

// Backends: 0 = Gloo, 1 = NCCL.
int runfn_c10d_has_nccl() {
#ifdef RUNFN_WITH_NCCL
  return 1;
#else
  return 0;
#endif
}

void runfn_c10d_free_error(char* message) { std::free(message); }

// libtorch's own log lines (`[E1204 ... socket.cpp:1028] [c10d] The client socket has timed
// out ...`, with C++ stack frames) would precede the tool's one error line: every failure they
// describe comes back to Rust as an error message anyway. Only fatal ones stay, unless the user
// asked for libtorch's logs with TORCH_CPP_LOG_LEVEL.
void runfn_c10d_quiet_logs() {
  if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) {
    FLAGS_caffe2_log_level = 3;  // c10's FATAL
  }
}

// Rendezvous through a TCPStore at addr:port and create the process group.
// `store_server`: 1 when this process hosts the store (rank 0 unless a launcher's agent does),
// `ifname`: a network interface for Gloo, or null to pick one from the master address.
char* runfn_c10d_connect(const char* addr, int port, int rank, int world, int64_t timeout_ms,
                         int backend, int store_server, const char* ifname, int gloo_threads,
                         void** out) {
  *out = nullptr;
  return guarded([&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(port);
    opts.isServer = store_server != 0;
    opts.numWorkers = static_cast<std::size_t>(world);
    // Every rank counts itself in; only the server then waits for the count to reach `world`.
    opts.waitWorkers = true;
    opts.timeout = timeout;
    opts.useLibUV = true;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(addr), opts);
    // One prefix per group, as torch.distributed does, so a launcher's store can be shared.
    auto store = c10::make_intrusive<c10d::PrefixStore>("runfn/default_pg", tcp);
    auto group = std::make_unique<Group>();
    group->store = store;
    group->timeout = timeout;
    if (backend == 0) {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (ifname != nullptr && ifname[0] != '\0') {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      } else if (is_loopback(addr)) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      options->threads = gloo_threads;
      group->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
    } else {
#ifdef RUNFN_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      group->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
#else
      throw std::runtime_error(
          "this build has no NCCL: build with the CUDA libtorch (scripts/setup-libtorch.sh --cuda)");
#endif
    }
    *out = group.release();
  });
}

void runfn_c10d_free(void* group) { delete static_cast<Group*>(group); }

// Host a TCPStore for a job's ranks, as torchrun's agent does: the ranks then join it as clients
// (TORCHELASTIC_USE_AGENT_STORE). Port 0 lets the system pick a free port, written to `bound`;
// holding the socket from here on means no other process can take the port before rank 0 starts.
char* runfn_c10d_host_store(int port, int64_t timeout_ms, int* bound, void** out) {
  *out = nullptr;
  return guarded([&] {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(port);
    opts.isServer = true;
    // The ranks count themselves in on the store; the host waits for nobody.
    opts.numWorkers = std::nullopt;
    opts.waitWorkers = false;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    opts.useLibUV = true;
    auto store = std::make_unique<c10::intrusive_ptr<c10d::TCPStore>>(
        c10::make_intrusive<c10d::TCPStore>(std::string("127.0.0.1"), opts));
    *bound = static_cast<int>((*store)->getPort());
    *out = store.release();
  });
}

void runfn_c10d_free_store(void* store) {
  delete static_cast<c10::intrusive_ptr<c10d::TCPStore>*>(store);
}

char* runfn_c10d_broadcast(void* group, at::Tensor* tensor, int root) {
  return guarded([&] {
    auto* g = static_cast<Group*>(group);
    std::vector<at::Tensor> tensors{*tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = g->timeout;
    g->backend->broadcast(tensors, opts)->wait(g->timeout);
  });
}

// Sums each tensor across ranks, in place: one collective per tensor (a bucket), all started
// before the first is waited on, so the buckets' transfers overlap.
char* runfn_c10d_allreduce_sum(void* group, at::Tensor** tensors, int n) {
  return guarded([&] {
    auto* g = static_cast<Group*>(group);
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    works.reserve(n);
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    opts.timeout = g->timeout;
    for (int i = 0; i < n; ++i) {
      std::vector<at::Tensor> one{*tensors[i]};
      works.push_back(g->backend->allreduce(one, opts));
    }
    for (auto& work : works) work->wait(g->timeout);
  });
}

// Gathers `input` from every rank into `outputs[0..world)`.
char* runfn_c10d_allgather(void* group, at::Tensor* input, at::Tensor** outputs, int world) {
  return guarded([&] {
    auto* g = static_cast<Group*>(group);
    std::vector<std::vector<at::Tensor>> out{as_vector(outputs, world)};
    std::vector<at::Tensor> in{*input};
    c10d::AllgatherOptions opts;
    opts.timeout = g->timeout;
    g->backend->allgather(out, in, opts)->wait(g->timeout);
  });
}

char* runfn_c10d_barrier(void* group) {
  return guarded([&] {
    auto* g = static_cast<Group*>(group);
    c10d::BarrierOptions opts;
    opts.timeout = g->timeout;
    g->backend->barrier(opts)->wait(g->timeout);
  });
}

}  // extern "C"
