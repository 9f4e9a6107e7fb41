// The frozen reference: its own forward-only stage and executor over the step's forward plan,
// run before the policy's so that the policy's head can read the reference's sequence NLLs.
#include "trident/train/reference_model.hpp"

#include "trident/core/trace.hpp"
#include "trident/train/schedule.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

ReferenceModel::ReferenceModel(const RunConfig& cfg, const ParallelGroups& g, Backend& be, int n_micro, Output output)
    : be_(be), B_(cfg.train.micro_batch_size), T_(cfg.model.seq_len), output_(output) {
  // The policy's model chunks, so that its parameters are the policy's layout (set_weights).
  const int chunks = cfg.parallel.virtual_stages;
  std::vector<Action> plan = make_forward_plan(g.topo.pp(), g.coord.pp, n_micro, chunks);
  // Forward only: the stage drops the recompute, and keeps the run's sequence parallelism.
  model_ = std::make_unique<GptStage>(cfg.model, g, be, B_, PipelineExecutor::slots_needed(plan),
                                      bucket_elements(cfg.parallel), false, activation_options(cfg), nullptr,
                                      chunks);
  executor_ = std::make_unique<PipelineExecutor>(*model_, *g.pp, std::move(plan));
  const size_t per_micro = output == Output::TokenNll ? static_cast<size_t>(B_) * T_ : B_;
  if (model_->stage().last()) nll_ = Buffer(be, n_micro * per_micro * sizeof(float));
}

ReferenceModel::~ReferenceModel() = default;

void ReferenceModel::set_weights(const std::vector<float>& params) { model_->set_params(params); }

void ReferenceModel::run(const Loader& load) {
  TraceRange range("reference forward");
  const bool tokens = output_ == Output::TokenNll;
  const TensorView nll = tokens ? token_nll() : sequence_nll();
  const size_t per_micro = tokens ? static_cast<size_t>(B_) * T_ : B_;
  executor_->run(
      [&](int micro, int slot) {
        load(*model_, micro, slot);
        if (nll.empty()) return;
        if (tokens)
          model_->set_token_nll(slot, nll.slice(micro * per_micro, per_micro));
        else
          model_->set_sequence_nll(slot, TensorView{}, nll.slice(micro * per_micro, per_micro));
      },
      false, 0.0f, UnitDone{});
  model_->zero_loss_sums();
}

void ReferenceModel::set_weights(TensorView params) { be_.copy(model_->params(), params); }

TensorView ReferenceModel::sequence_nll() const {
  return model_->stage().last() && output_ == Output::SequenceNll ? nll_.view(DType::F32) : TensorView{};
}

TensorView ReferenceModel::token_nll() const {
  return model_->stage().last() && output_ == Output::TokenNll ? nll_.view(DType::F32) : TensorView{};
}

}  // namespace trident
