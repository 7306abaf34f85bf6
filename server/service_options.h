// What the gRPC service (server/service.h) bounds, apart from the Ranker's own limits:
// plain values, the defaults of tgraph-server's flags.
#pragma once

#include <cstdint>

namespace tgraph {

struct ServiceOptions {
  // The largest graph RegisterGraph accepts: nodes, or an HLO module's instructions.
  int64_t max_nodes = 200000;
  // The memory every call in progress may hold at once (byte_budget.h: requests,
  // modules' and searches' working memory); past it, RESOURCE_EXHAUSTED.
  int64_t request_bytes = int64_t{512} << 20;
  int64_t max_message_bytes = int64_t{256} << 20;  // the transport's limit, named in refusals
  int64_t request_log_every = 100;                  // request_log.h; 0: failed calls only
};

}  // namespace tgraph
