// The server's transport credentials: plaintext, TLS (a certificate and its key), or
// mutual TLS (also a CA that client certificates must chain to). The files are
// re-read every `reload_s` seconds, so a rotated certificate (a Kubernetes Secret
// updated in place, by an atomic directory swap) is served without a restart.
// Called once at startup; gRPC's certificate provider re-reads on its own thread.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tgraph {

struct ServerTlsOptions {
  std::string cert_file;       // PEM certificate chain; with key_file, or neither (plaintext)
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // PEM CA bundle: clients must present a certificate it signed (mTLS)
  int reload_s = 60;

  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !client_ca_file.empty(); }
  // "plaintext", "TLS" or "mutual TLS", for the startup log.
  std::string Describe() const;
};

// INVALID_ARGUMENT naming the flag and file when a file is missing, unreadable or not
// PEM, when the key is not the certificate's, or when the options do not make sense
// together (a key without a certificate, a client CA without either).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerTlsOptions& options);

}  // namespace tgraph
