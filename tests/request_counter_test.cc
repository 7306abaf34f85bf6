// The request counter's reading of a cancelled call: by its deadline or not.
#define CATCH_CONFIG_PREFIX_ALL  // as the other files of this binary (LibTorch defines CHECK)
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "server/request_counter.h"

using namespace tgraph;
using std::chrono::milliseconds;
using std::chrono::system_clock;

CATCH_TEST_CASE("request counter: a cancellation within a second of the server's copy of the deadline is the deadline",
                "[server]") {
  // The client cancels at its own deadline; a loaded server parsed the call's headers, and
  // so started its copy of the deadline, up to hundreds of milliseconds later.
  CATCH_CHECK(DeadlinePassed(system_clock::now() - milliseconds(1)));
  CATCH_CHECK(DeadlinePassed(system_clock::now() + milliseconds(400)));
  CATCH_CHECK(DeadlinePassed(system_clock::now() + milliseconds(900)));
  CATCH_CHECK_FALSE(DeadlinePassed(system_clock::now() + milliseconds(1500)));
  CATCH_CHECK_FALSE(DeadlinePassed(system_clock::now() + std::chrono::hours(1)));
  CATCH_CHECK_FALSE(DeadlinePassed(system_clock::time_point::max()));  // no deadline
}

CATCH_TEST_CASE("request counter: the metric label names each code the server answers with, OTHER the rest", "[server]") {
  CATCH_CHECK(std::string(GrpcCodeName(grpc::CANCELLED)) == "CANCELLED");
  CATCH_CHECK(std::string(GrpcCodeName(grpc::DEADLINE_EXCEEDED)) == "DEADLINE_EXCEEDED");
  CATCH_CHECK(std::string(GrpcCodeName(grpc::RESOURCE_EXHAUSTED)) == "RESOURCE_EXHAUSTED");
  CATCH_CHECK(std::string(GrpcCodeName(grpc::UNAUTHENTICATED)) == "OTHER");
}
