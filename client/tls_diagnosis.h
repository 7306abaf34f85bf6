// Why a call failed to connect, when the reason is TLS rather than the network: gRPC
// reports a refused handshake as UNAVAILABLE (retried as a network fault for the whole
// retry budget) with its cause in text ("certificate verify failed", "Peer name ... is not
// in peer certificate", "wrong version number"), and a plaintext client that reached a TLS
// server, or a client certificate a mutual-TLS server refused, only as "Socket closed".
// DiagnoseTls reads the first kind and, for the second, probes the target once with a
// TLS handshake of its own (OpenSSL; no verification; the client's certificate when it
// has one) to tell a TLS mismatch from a server going away.
// Threads: any; no shared state. The probe takes at most about kProbeTimeout.
#pragma once

#include <chrono>
#include <optional>

#include "absl/status/status.h"
#include "client/client.h"
#include "grpcpp/support/status.h"

namespace tgraph {

inline constexpr std::chrono::seconds kProbeTimeout{2};

// UNAUTHENTICATED naming the TLS problem and the flag that fixes it, or nullopt when the
// failure is not TLS's (no server, a restart: the caller retries).
std::optional<absl::Status> DiagnoseTls(const grpc::Status& status, const ClientOptions& options);

}  // namespace tgraph
