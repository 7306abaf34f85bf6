// Data-parallel training's communication, on PyTorch's own distributed engine: c10d's
// ProcessGroupGloo (all-reduce, broadcast, barrier over TCP) with a TCPStore for the
// rendezvous (rank 0 serves it at master_addr:master_port, the others connect), as
// torch.distributed's env:// initialisation does. The trainer (model/train/trainer.h)
// sums gradients with it every step; nothing else in tgraph talks to other processes.
//
// Failures: a peer that dies (its sockets close) or stops answering for `timeout` makes
// every collective call on the other ranks throw (c10::Error or std::runtime_error);
// the trainer turns that into its fold's error, so the job fails instead of hanging or
// publishing. Rendezvous errors (no rank 0 within `timeout`, a port in use) are statuses.
//
// Threads: one thread per process calls a Collective (the fold's training loop).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tgraph {

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";  // where rank 0's TCPStore listens
  int master_port = 29500;
  // Gloo's network interface (e.g. eth0); empty: the address this host's name resolves
  // to (LibTorch's default device).
  std::string interface;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

// Rank, world size and rendezvous from the environment, as torch.distributed's env://
// reads them: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GLOO_SOCKET_IFNAME; unset
// variables keep `defaults`. (A Kubernetes Indexed Job sets RANK from its completion
// index: deploy/k8s/training/train-distributed-job.yaml.)
// INVALID_ARGUMENT names a variable that does not parse.
absl::StatusOr<DistributedOptions> DistributedOptionsFromEnv(const DistributedOptions& defaults);

// What a data-parallel loop needs from its peers. Every rank makes the same calls in the
// same order, with tensors of the same shapes.
class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Replaces t (contiguous, CPU) by its sum over the ranks, in place.
  virtual void AllReduceSum(at::Tensor& t) = 0;
  // Replaces t by rank 0's, in place.
  virtual void Broadcast(at::Tensor& t) = 0;
};

// Connects this rank: waits (up to options.timeout) for all world_size ranks to reach
// the rendezvous. UNAVAILABLE / DEADLINE_EXCEEDED name the address and the rank.
absl::StatusOr<std::unique_ptr<Collective>> ConnectGloo(const DistributedOptions& options);

}  // namespace tgraph
