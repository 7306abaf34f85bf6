#include "server/tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"

namespace tgraph {

std::string ServerTlsOptions::Describe() const {
  if (!enabled()) return "plaintext";
  return client_ca_file.empty() ? "TLS" : "mutual TLS (client certificates required)";
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerTlsOptions& o) {
  if (!o.enabled()) return grpc::InsecureServerCredentials();
  if (o.cert_file.empty() || o.key_file.empty())
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert and --tls_key (the server's certificate chain and its private key, PEM); "
        "--tls_client_ca adds client-certificate checks on top");
  if (o.reload_s < 1) return absl::InvalidArgumentError(absl::StrCat("--tls_reload_s must be >= 1, got ", o.reload_s));
  // Read here for precise errors at startup; the watcher below reads them again.
  if (absl::StatusOr<std::string> s = ReadPemFile(o.cert_file, "--tls_cert", "CERTIFICATE"); !s.ok()) return s.status();
  if (absl::StatusOr<std::string> s = ReadPemFile(o.key_file, "--tls_key", "PRIVATE KEY"); !s.ok()) return s.status();
  if (!o.client_ca_file.empty())
    if (absl::StatusOr<std::string> s = ReadPemFile(o.client_ca_file, "--tls_client_ca", "CERTIFICATE"); !s.ok())
      return s.status();
  const auto reload = static_cast<unsigned int>(o.reload_s);
  auto provider = o.client_ca_file.empty()
                      ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(o.key_file, o.cert_file,
                                                                                             reload)
                      : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                            o.key_file, o.cert_file, o.client_ca_file, reload);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!o.client_ca_file.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace tgraph
