#include "server/tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"

namespace tgraph {

std::string ServerTlsOptions::Describe() const {
  if (!enabled()) return "plaintext";
  return client_ca_file.empty() ? "TLS" : "mutual TLS (client certificates required)";
}

namespace {

// The first certificate of the chain and the key, parsed: a key that is not the
// certificate's is an error here, at start, where gRPC would accept it and fail every
// handshake later (clients saw "empty address list" or "Socket closed").
absl::Status CheckKeyMatchesCertificate(const ServerTlsOptions& o, const std::string& cert_pem,
                                        const std::string& key_pem) {
  const auto bio = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                     &BIO_free);
  };
  auto cert_bio = bio(cert_pem), key_bio = bio(key_pem);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  if (!cert)
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert ", o.cert_file, ": its first CERTIFICATE block is not a valid X.509 certificate"));
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key)
    return absl::InvalidArgumentError(absl::StrCat("--tls_key ", o.key_file,
                                                   ": not a private key OpenSSL can read (an encrypted key is not "
                                                   "supported: give it unencrypted, as a Kubernetes TLS Secret holds it)"));
  ERR_clear_error();
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls_key ", o.key_file, " is not the private key of --tls_cert ",
                                                   o.cert_file, ": give the key the certificate was issued for"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerTlsOptions& o) {
  if (!o.enabled()) return grpc::InsecureServerCredentials();
  if (o.cert_file.empty() || o.key_file.empty())
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert and --tls_key (the server's certificate chain and its private key, PEM); "
        "--tls_client_ca adds client-certificate checks on top");
  if (o.reload_s < 1) return absl::InvalidArgumentError(absl::StrCat("--tls_reload_s must be >= 1, got ", o.reload_s));
  // Read here for precise errors at startup; the watcher below reads them again.
  absl::StatusOr<std::string> cert = ReadPemFile(o.cert_file, "--tls_cert", "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(o.key_file, "--tls_key", "PRIVATE KEY");
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckKeyMatchesCertificate(o, *cert, *key); !s.ok()) return s;
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
