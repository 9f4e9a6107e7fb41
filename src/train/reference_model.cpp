// The frozen reference: its own forward-only stage and executor over the step's forward plan,
// run before the policy's so that the policy's head can read the reference's sequence NLLs.
#include "trident/train/reference_model.hpp"

#include "trident/core/trace.hpp"
#include "trident/train/schedule.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

ReferenceModel::ReferenceModel(const RunConfig& cfg, const ParallelGroups& g, Backend& be, int n_micro)
    : be_(be), B_(cfg.train.micro_batch_size) {
  std::vector<Action> plan = make_forward_plan(g.topo.pp(), g.coord.pp, n_micro);
  // Forward only: the stage drops the recompute, and keeps the run's sequence parallelism.
  model_ = std::make_unique<GptStage>(cfg.model, g, be, B_, PipelineExecutor::slots_needed(plan),
                                      bucket_elements(cfg.parallel), false, activation_options(cfg));
  executor_ = std::make_unique<PipelineExecutor>(*model_, *g.pp, std::move(plan));
  if (model_->stage().last()) nll_ = Buffer(be, static_cast<size_t>(n_micro) * B_ * sizeof(float));
}

ReferenceModel::~ReferenceModel() = default;

void ReferenceModel::set_weights(const std::vector<float>& params) {
  TRIDENT_CHECK(params.size() == model_->params().numel, "ReferenceModel::set_weights: not this rank's layout");
  Buffer staging(be_, params.size() * sizeof(float));
  TensorView f32 = staging.view(DType::F32).slice(0, params.size());
  be_.copy_from_host(f32, params.data());
  be_.copy(model_->params(), f32);
  be_.synchronize();
}

void ReferenceModel::run(const Loader& load) {
  TraceRange range("reference forward");
  const TensorView nll = sequence_nll();
  executor_->run(
      [&](int micro, int slot) {
        load(*model_, micro, slot);
        if (!nll.empty()) model_->set_sequence_nll(slot, TensorView{}, nll.slice(static_cast<size_t>(micro) * B_, B_));
      },
      false, 0.0f, UnitDone{});
  model_->zero_loss_sums();
}

void ReferenceModel::set_weights(TensorView params) { be_.copy(model_->params(), params); }

TensorView ReferenceModel::sequence_nll() const {
  return model_->stage().last() ? nll_.view(DType::F32) : TensorView{};
}

}  // namespace trident
