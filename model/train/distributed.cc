// The one translation unit that includes c10d's Gloo headers (compiled with
// USE_C10D_GLOO, linked with Debian's libgloo).
#include "model/train/distributed.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tgraph {

namespace {

absl::Status IntFromEnv(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return absl::OkStatus();
  if (!absl::SimpleAtoi(v, out))
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, "='", v, "': expected an integer"));
  return absl::OkStatus();
}

class GlooCollective : public Collective {
 public:
  GlooCollective(int rank, int world, c10::intrusive_ptr<c10d::Store> store,
                 c10::intrusive_ptr<c10d::ProcessGroupGloo> group)
      : rank_(rank), world_(world), store_(std::move(store)), group_(std::move(group)) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void AllReduceSum(at::Tensor& t) override {
    Run("all-reduce", [&](std::vector<at::Tensor>& one) { group_->allreduce(one)->wait(); }, t);
  }
  void Broadcast(at::Tensor& t) override {
    Run("broadcast", [&](std::vector<at::Tensor>& one) { group_->broadcast(one)->wait(); }, t);
  }

 private:
  // Gloo's errors name a socket; say what it means for the job.
  template <typename Fn>
  void Run(const char* what, const Fn& fn, at::Tensor& t) {
    std::vector<at::Tensor> one{t};
    try {
      fn(one);
    } catch (const c10::Error& e) {
      Rethrow(what, e.what_without_backtrace());
    } catch (const std::exception& e) {
      Rethrow(what, e.what());
    }
  }
  [[noreturn]] void Rethrow(const char* what, const std::string& error) const {
    throw std::runtime_error(absl::StrCat("distributed training, rank ", rank_, " of ", world_, ": ", what,
                                          " failed: another rank exited or did not answer within the timeout (",
                                          error, ")"));
  }

  int rank_, world_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

}  // namespace

absl::StatusOr<DistributedOptions> DistributedOptionsFromEnv(const DistributedOptions& defaults) {
  DistributedOptions o = defaults;
  if (absl::Status s = IntFromEnv("RANK", &o.rank); !s.ok()) return s;
  if (absl::Status s = IntFromEnv("WORLD_SIZE", &o.world_size); !s.ok()) return s;
  if (absl::Status s = IntFromEnv("MASTER_PORT", &o.master_port); !s.ok()) return s;
  if (const char* v = std::getenv("MASTER_ADDR"); v != nullptr && *v != '\0') o.master_addr = v;
  if (const char* v = std::getenv("GLOO_SOCKET_IFNAME"); v != nullptr && *v != '\0') o.interface = v;
  return o;
}

absl::StatusOr<std::unique_ptr<Collective>> ConnectGloo(const DistributedOptions& o) {
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " is outside 0..world size - 1 (world size ", o.world_size, ")"));
  if (o.master_port < 1 || o.master_port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("master port ", o.master_port, " is outside 1..65535"));
  const std::string where = absl::StrCat("rendezvous at ", o.master_addr, ":", o.master_port, " (rank ", o.rank,
                                         " of ", o.world_size, ")");
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(o.master_port);
    so.isServer = o.rank == 0;
    so.numWorkers = static_cast<size_t>(o.world_size);
    so.waitWorkers = true;
    so.timeout = o.timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
    auto options = c10d::ProcessGroupGloo::Options::create(o.timeout);
    options->devices.push_back(o.interface.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                                   : c10d::ProcessGroupGloo::createDeviceForInterface(o.interface));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, o.rank, o.world_size, options);
    return std::unique_ptr<Collective>(new GlooCollective(o.rank, o.world_size, store, group));
  } catch (const c10::Error& e) {
    return absl::UnavailableError(absl::StrCat(where, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(where, ": ", e.what()));
  }
}

}  // namespace tgraph
