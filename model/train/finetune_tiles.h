// Fine-tuning a tile collection on the farm's measurements: what a tile model ranks
// with is its prior of measured problems (model/tile/tile_prior.h; the network's share
// has been chosen 0 on every real training), so the child is the parent with the
// measurement store's problems of one kernel joined to its prior, tagged with that
// kernel (a search of another kernel never reads them; MeasuredSlowdowns::ForKernel),
// and published only if it ranks those problems, each with its own shape left out, at
// least as well as the parent does. The network's weights and share are kept as they
// were trained. One kernel at a time: the store's measurements of two kernels never go
// into one prior.
#pragma once

#include "absl/status/statusor.h"
#include "model/core/dataset.h"
#include "model/nn/model_io.h"
#include "model/store/registry.h"
#include "model/train/finetune.h"

namespace tgraph {

// `parent` is the model to start from (`result` says which: Finetune's ParentModel).
// Errors: no tile prior of measured problems (FAILED_PRECONDITION), no measurements of
// the collection or of o.kernel (NOT_FOUND), several kernels and no o.kernel
// (INVALID_ARGUMENT, naming them); too little evidence is a result, not an error
// (not_published says why), as for layouts.
absl::StatusOr<FinetuneResult> FinetuneTilePrior(const FinetuneOptions& o, const Collection& c,
                                                 const Registry& registry, LoadedModel parent, FinetuneResult result);

}  // namespace tgraph
