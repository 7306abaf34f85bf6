// libFuzzer target: untrusted bytes as XLA's autotuning logs (binary or protobuf text,
// told apart by content as tgraph-featurize does) through the reader. A crash, a leak, a
// sanitizer report or a hang is a defect; an error is the right answer to most inputs.
#include <cstddef>
#include <cstdint>

#include "model/hlo/autotuning_logs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)tgraph::hlo::ReadAutotuningLogs(bytes, "fuzz");
  return 0;
}
