// Machine-readable error reasons: the contract between server and clients where a
// status code alone is ambiguous. NOT_FOUND means "graph not registered" (register it
// and retry) or "collection or version unknown" (do not retry); the server tells them
// apart with the trailing metadata entry kErrorReasonKey = kGraphNotRegistered,
// which clients (C++ and Python) key on, never on message text (docs/api.md).
// Pure functions on statuses: any thread.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace tgraph {

inline constexpr char kErrorReasonKey[] = "tgraph-error-reason";  // gRPC trailing metadata key
inline constexpr char kGraphNotRegistered[] = "GRAPH_NOT_REGISTERED";

// Request metadata: the size of the serialized request, sent by tgraph's clients. A
// request the server could not read ended cancelled either way, by a transport refusing
// it over --max_message_bytes or by a client that gave up while sending; gRPC does not
// say which, this does (a request of at most the limit was cancelled, not refused).
inline constexpr char kRequestBytesKey[] = "x-request-bytes";

// The absl::Status payload that carries a reason from the ranker to the gRPC layer.
inline constexpr char kErrorReasonPayload[] = "type.tgraph.dev/tgraph.ErrorReason";

inline absl::Status WithErrorReason(absl::Status s, const std::string& reason) {
  s.SetPayload(kErrorReasonPayload, absl::Cord(reason));
  return s;
}

inline std::optional<std::string> ErrorReason(const absl::Status& s) {
  absl::optional<absl::Cord> p = s.GetPayload(kErrorReasonPayload);
  if (!p) return std::nullopt;
  return std::string(*p);
}

}  // namespace tgraph
