// The server's Prometheus metrics (prometheus-cpp), exposed on their own HTTP port.
// Names say what they count, with units (Triton's convention).
#pragma once

#include <memory>
#include <string>

#include "server/model_manager.h"
#include "server/ranker.h"

namespace tgraph {

class ServerMetrics {
 public:
  // Serves GET /metrics on `address` ("0.0.0.0:9090"; port 0 picks a free port).
  // Throws std::runtime_error when it cannot listen.
  explicit ServerMetrics(const std::string& address);
  ~ServerMetrics();
  int port() const;  // the port actually bound

  void RecordRequest(const std::string& method, const std::string& code, double seconds);
  void RecordRank(int64_t configs, const RankTiming& timing);
  void RecordModelEvent(const ModelEvent& e);
  // ReportMeasurements: measurements and bytes stored, or a store error by code.
  void RecordMeasurements(int64_t measurements, int64_t bytes);
  void RecordMeasurementError(const std::string& code);
  // Refreshes gauges from the ranker's counters and the loaded versions.
  void Refresh(const RankerStats& stats, const ModelManager& models);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tgraph
