// The server's Prometheus metrics (prometheus-cpp), exposed on their own HTTP port.
// Names say what they count, with units (Triton's convention).
//
// Threads: the Record* calls come from gRPC handler threads and the registry poller at
// once (prometheus-cpp's metrics are thread-safe); scrapes run on the HTTP server's
// thread. The ServerMetrics must outlive the RankerService and the interceptor that
// record into it (server/server.cc builds it first and destroys it last).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model_manager.h"
#include "server/ranker.h"

namespace tgraph {

class ServerMetrics {
 public:
  // Serves GET /metrics on `address` ("0.0.0.0:9090"; port 0 picks a free port).
  // INVALID_ARGUMENT for an address that is not IPv4 HOST:PORT, UNAVAILABLE when it
  // cannot listen. `precision` is the inference precision, for tgraph_build_info.
  static absl::StatusOr<std::unique_ptr<ServerMetrics>> Start(const std::string& address, const std::string& precision);
  ~ServerMetrics();
  int port() const;  // the port actually bound

  void RecordRequest(const std::string& method, const std::string& code, double seconds);
  void RecordRank(int64_t configs, const RankTiming& timing);
  void RecordSearch(const RankTiming& timing, bool tile);  // its wait in the search or tile lane
  void RecordModelEvent(const ModelEvent& e);
  // ReportMeasurements: measurements and bytes stored, or a store error by code.
  void RecordMeasurements(int64_t measurements, int64_t bytes);
  void RecordMeasurementError(const std::string& code);
  // A registry poll that found nothing servable or could not read (RegistryCheck::reason).
  void RecordRegistryError(const std::string& reason);
  // What every scrape reads first: the ranker's counters and the loaded versions, so
  // that gauges and counters are current whenever they are read. Call with both once
  // they serve, and with nullptrs before either goes away (a scrape in progress
  // finishes first: Watch waits for it). Safe from any thread, any number of times.
  void Watch(const Ranker* ranker, const ModelManager* models);

 private:
  struct Impl;
  explicit ServerMetrics(std::unique_ptr<Impl> impl);
  void Refresh(const RankerStats& stats, const ModelManager& models);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tgraph
