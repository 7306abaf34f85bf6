#include "client/tls_diagnosis.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tgraph {

namespace {

// What one TLS handshake with the target showed.
struct Probe {
  bool connected = false;  // TCP
  bool tls = false;        // the server completed a TLS handshake
  // After it, the server closed without a byte of HTTP/2 (a gRPC server sends its
  // SETTINGS at once): it refused the client's certificate. What OpenSSL said of it.
  bool closed_after_handshake = false;
  std::string refusal;
};

int ConnectTcp(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return -1;
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kProbeTimeout).count())) != 1 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{static_cast<time_t>(kProbeTimeout.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

bool UsePem(SSL_CTX* ctx, const ClientTlsOptions& tls) {
  if (tls.cert_chain_pem.empty() || tls.private_key_pem.empty()) return true;
  std::unique_ptr<BIO, decltype(&BIO_free)> cb(
      BIO_new_mem_buf(tls.cert_chain_pem.data(), static_cast<int>(tls.cert_chain_pem.size())), &BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> kb(
      BIO_new_mem_buf(tls.private_key_pem.data(), static_cast<int>(tls.private_key_pem.size())), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr), &X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr),
                                                          &EVP_PKEY_free);
  return cert && key && SSL_CTX_use_certificate(ctx, cert.get()) == 1 && SSL_CTX_use_PrivateKey(ctx, key.get()) == 1;
}

std::string LastSslError() {
  std::string out;
  for (unsigned long e; (e = ERR_get_error()) != 0;)
    if (const char* r = ERR_reason_error_string(e)) out = r;
  return out;
}

// SIGPIPE blocked on this thread while it lives (a write to a server that closed must
// not kill the client's process; a library does not change the process's handlers), and
// one raised meanwhile consumed before it is unblocked.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigpending(&pending_before_);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    if (!sigismember(&pending_before_, SIGPIPE)) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE)) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_, old_, pending_before_;
};

Probe ProbeTls(const std::string& target, const ClientTlsOptions& tls) {
  const NoSigpipe guard;
  Probe out;
  absl::string_view t = target;
  absl::ConsumePrefix(&t, "dns:///");
  absl::ConsumePrefix(&t, "ipv4:");
  const size_t colon = t.rfind(':');
  if (colon == absl::string_view::npos || absl::StartsWith(t, "unix:")) return out;
  std::string host(t.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const int fd = ConnectTcp(host, std::string(t.substr(colon + 1)));
  if (fd < 0) return out;
  out.connected = true;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  const bool ready = ctx && UsePem(ctx.get(), tls);  // the client's certificate, before SSL_new copies it
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(ready ? SSL_new(ctx.get()) : nullptr, &SSL_free);
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  if (ssl) {
    SSL_set_verify(ssl.get(), SSL_VERIFY_NONE, nullptr);
    SSL_set_alpn_protos(ssl.get(), kAlpn, sizeof kAlpn);
    const std::string sni = tls.server_name.empty() ? host : tls.server_name;
    SSL_set_tlsext_host_name(ssl.get(), sni.c_str());
    SSL_set_fd(ssl.get(), fd);
    ERR_clear_error();
    if (SSL_connect(ssl.get()) == 1) {
      out.tls = true;
      // TLS 1.3 servers check a client certificate after the handshake: a refusal is the
      // connection closed (or an alert) where the server's HTTP/2 SETTINGS should come.
      static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
      char buf[64];
      if (SSL_write(ssl.get(), kPreface, sizeof kPreface - 1) <= 0 || SSL_read(ssl.get(), buf, sizeof buf) <= 0) {
        out.closed_after_handshake = true;
        out.refusal = LastSslError();
      }
    }
  }
  ERR_clear_error();
  close(fd);
  return out;
}

absl::Status Tls(const ClientOptions& o, absl::string_view cause) {
  return absl::UnauthenticatedError(absl::StrCat("TLS with ", o.target, " failed: ", cause));
}

}  // namespace

std::optional<absl::Status> DiagnoseTls(const grpc::Status& status, const ClientOptions& o) {
  if (status.error_code() != grpc::UNAVAILABLE && status.error_code() != grpc::UNKNOWN) return std::nullopt;
  const std::string& m = status.error_message();
  if (o.tls.enabled) {
    if (absl::StrContains(m, "wrong version number"))
      return Tls(o, "the server does not speak TLS (it answered in plaintext): connect without --tls and --tls_*");
    if (absl::StrContains(m, "certificate verify failed"))
      return Tls(o, absl::StrCat("the server's certificate does not chain to ",
                                 o.tls.root_certs_pem.empty() ? "gRPC's default roots (give --tls_ca)"
                                                              : "the CAs of --tls_ca",
                                 " (", m.substr(m.rfind(": ") + 2), ")"));
    if (const size_t at = m.find("Peer name "); at != std::string::npos)
      return Tls(o, absl::StrCat(m.substr(at), ": give --tls_server_name a name the certificate carries"));
    if (absl::StrContains(m, "Ssl handshake failed") || absl::StrContains(m, "Handshake failed"))
      return Tls(o, absl::StrCat("the handshake failed (", m.substr(m.rfind(": ") + 2), ")"));
  }
  if (!absl::StrContains(m, "Socket closed") && !absl::StrContains(m, "Connection reset")) return std::nullopt;
  const Probe p = ProbeTls(o.target, o.tls);
  if (!p.tls) return std::nullopt;  // not a TLS server, or not there (a restart): retry
  if (!o.tls.enabled)
    return Tls(o, "the server speaks TLS and this client connected in plaintext: give --tls_ca CA.pem (or --tls "
                  "for gRPC's default roots)");
  if (p.closed_after_handshake) {
    const std::string said = p.refusal.empty() ? "" : absl::StrCat(" (", p.refusal, ")");
    return Tls(o, o.tls.cert_chain_pem.empty()
                      ? absl::StrCat("the server closed the connection after the TLS handshake", said,
                                     ": it requires a client certificate (mutual TLS); give --tls_cert and --tls_key")
                      : absl::StrCat("the server closed the connection after the TLS handshake", said,
                                     ": it refused this client's certificate (--tls_cert); give one its client CA signed"));
  }
  return std::nullopt;
}

}  // namespace tgraph
