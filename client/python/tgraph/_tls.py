"""Why a call failed to connect, when the reason is TLS rather than the network (the C++
client's client/tls_diagnosis.h, the same rules): gRPC reports a refused handshake as
UNAVAILABLE, which the client would retry for its whole budget, with its cause in text
("certificate verify failed", "Peer name ... is not in peer certificate", "wrong version
number"); a plaintext client at a TLS server, or a client certificate refused by mutual
TLS, shows only "Socket closed", so the target is probed once with a TLS handshake of
our own (no verification) to tell a TLS mismatch from a server going away."""
import socket
import ssl
from typing import Optional

import grpc

from ._errors import TgraphError

PROBE_TIMEOUT_S = 2.0


def _probe(address: str, server_name: Optional[str]):
    """(tls, closed_after_handshake): whether the target completed a TLS handshake, and
    whether it then closed without a byte of HTTP/2 (a gRPC server sends its SETTINGS at
    once). (False, False) when it cannot be reached."""
    target = address
    for prefix in ("dns:///", "ipv4:"):
        if target.startswith(prefix):
            target = target[len(prefix):]
    host, sep, port = target.rpartition(":")
    if not sep or target.startswith("unix:") or not port.isdigit():
        return False, False
    host = host.strip("[]")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S) as raw:
            try:
                tls = ctx.wrap_socket(raw, server_hostname=server_name or host)
            except (ssl.SSLError, OSError):
                return False, False
            try:
                tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                return True, not tls.recv(64)
            except (ssl.SSLError, OSError):
                return True, True
    except OSError:
        return False, False


def tls_error(e: grpc.RpcError, address: str, secure: bool, has_cert: bool,
              server_name: Optional[str]) -> Optional[TgraphError]:
    """UNAUTHENTICATED naming the TLS problem and the argument that fixes it, or None when
    the failure is not TLS's (the caller retries)."""
    if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
        return None
    m = e.details() or ""

    def fail(cause):
        return TgraphError(grpc.StatusCode.UNAUTHENTICATED, f"TLS with {address} failed: {cause}")

    if secure:
        # OpenSSL says "certificate verify failed", BoringSSL (grpcio's wheels)
        # "CERTIFICATE_VERIFY_FAILED": compared lower-cased, underscores as spaces.
        said = m.lower().replace("_", " ")
        if "wrong version number" in said:
            return fail("the server does not speak TLS (it answered in plaintext): connect without tls")
        if "certificate verify failed" in said:
            return fail("the server's certificate does not chain to the CAs of tls_ca (or the default roots)")
        if "Peer name " in m:
            return fail(m[m.index("Peer name "):] + ": give tls_server_name a name the certificate carries")
        if "handshake failed" in said:
            return fail(f"the handshake failed ({m[m.rfind(': ') + 2:]})")
    if "Socket closed" not in m and "Connection reset" not in m:
        return None
    tls, closed = _probe(address, server_name)
    if not tls:
        return None
    if not secure:
        return fail("the server speaks TLS and this client connected in plaintext: give tls_ca (or tls=True for "
                    "the default roots)")
    if closed:
        return fail("the server closed the connection after the TLS handshake: "
                    + ("it refused this client's certificate (tls_cert); give one its client CA signed" if has_cert
                       else "it requires a client certificate (mutual TLS); give tls_cert and tls_key"))
    return None
