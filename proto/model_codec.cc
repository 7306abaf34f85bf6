#include "proto/model_codec.h"

namespace tgraph {

void EncodeModelInfo(const std::string& collection, int64_t version, const Manifest& m,
                     const std::vector<int64_t>& loaded_versions, v1::ModelInfo* info) {
  info->set_collection(collection);
  info->set_version(version);
  for (int64_t v : loaded_versions) info->add_loaded_versions(v);
  info->set_architecture(ArchitectureName(m.spec.architecture));
  info->set_hidden(m.spec.hidden);
  info->set_folds(static_cast<int64_t>(m.folds.size()));
  double sum = 0;
  for (const FoldEntry& f : m.folds) sum += f.valid_tau;
  info->set_mean_valid_score(m.folds.empty() ? 0 : sum / static_cast<double>(m.folds.size()));
  info->set_created(m.created);
  info->set_batch_size(m.batch_size);
  info->set_reference_configs(m.reference_configs);
  v1::Provenance* p = info->mutable_provenance();
  p->set_data(m.provenance.data);
  p->set_dataset(m.provenance.dataset);
  p->set_data_fingerprint(m.data_fingerprint);
  p->set_graphs(m.provenance.graphs);
  p->set_configurations(m.provenance.configurations);
  p->set_finetunes(static_cast<int64_t>(m.provenance.finetunes.size()));
  for (const Provenance::Finetune& f : m.provenance.finetunes) {
    p->set_finetune_graphs(p->finetune_graphs() + f.graphs);
    p->set_finetune_measurements(p->finetune_measurements() + f.measurements);
  }
  p->set_synthetic_only(m.provenance.SyntheticOnly());
  p->set_summary(m.provenance.Summary());
  if (m.tile_space) info->set_tile_space(m.tile_space->ToJson());
  if (m.tile_prior) {
    v1::TilePriorInfo* t = info->mutable_tile_prior();
    t->set_weight(m.tile_prior->weight);
    t->set_network_share(m.tile_prior->network_share);
    t->set_problems(m.tile_prior->problems);
  }
}

ModelInfo DecodeModelInfo(const v1::ModelInfo& m) {
  ModelInfo info;
  info.collection = m.collection();
  info.version = m.version();
  info.loaded_versions.assign(m.loaded_versions().begin(), m.loaded_versions().end());
  info.architecture = m.architecture();
  info.hidden = m.hidden();
  info.folds = m.folds();
  info.mean_valid_score = m.mean_valid_score();
  info.created = m.created();
  info.batch_size = m.batch_size();
  info.reference_configs = m.reference_configs();
  const v1::Provenance& p = m.provenance();
  info.data = p.data();
  info.dataset = p.dataset();
  info.data_fingerprint = p.data_fingerprint();
  info.graphs = p.graphs();
  info.configurations = p.configurations();
  info.finetunes = p.finetunes();
  info.finetune_graphs = p.finetune_graphs();
  info.finetune_measurements = p.finetune_measurements();
  info.synthetic_only = p.synthetic_only();
  info.provenance = p.summary();
  info.tile_space = m.tile_space();
  if (m.has_tile_prior()) {
    info.tile_prior.emplace();
    info.tile_prior->weight = m.tile_prior().weight();
    info.tile_prior->network_share = m.tile_prior().network_share();
    info.tile_prior->problems = m.tile_prior().problems();
  }
  return info;
}

}  // namespace tgraph
