// ReferenceModel: a frozen copy of the policy's initial weights in the policy's layout (same TP
// shards and pipeline stages), forward only: no gradients, optimizer state or updates. For each
// micro-batch of a step it gives the per-sequence sums of token losses (the negative
// log-probabilities of the trained targets) on the last stage: DPO's reference log-probabilities,
// and the frozen reference that a KL penalty (online RL) measures against.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "trident/config/run_config.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/executor.hpp"

namespace trident {

class ReferenceModel {
 public:
  // What run() leaves on the last stage: each sequence's sum of token losses (DPO), or each
  // position's token loss (online RL's per-token KL penalty).
  enum class Output { SequenceNll, TokenNll };
  // cfg must be validated; n_micro micro-batches of train.micro_batch_size sequences per run().
  ReferenceModel(const RunConfig& cfg, const ParallelGroups& g, Backend& be, int n_micro,
                 Output output = Output::SequenceNll);
  ~ReferenceModel();

  // The frozen weights: this rank's layout().total() fp32 parameters (the policy's initial ones),
  // rounded to the compute dtype as the policy's are.
  void set_weights(const std::vector<float>& params);
  // The same from parameters in backend memory in the compute dtype (the policy's, at its start).
  void set_weights(TensorView params);
  GptStage& model() { return *model_; }

  // Forward of the step's micro-batches through the pipeline: load(model, micro, slot) gives the
  // slot its tokens (GptStage::set_tokens). Afterwards sequence_nll() holds the results.
  using Loader = std::function<void(GptStage& model, int micro, int slot)>;
  void run(const Loader& load);
  // (n_micro, B) f32 per-sequence NLL (Output::SequenceNll), or (n_micro, B*T) f32 per-position
  // token losses (Output::TokenNll), of the last run, in backend memory on the last stage; empty
  // elsewhere.
  TensorView sequence_nll() const;
  TensorView token_nll() const;

 private:
  Backend& be_;
  int B_, T_;
  Output output_;
  std::unique_ptr<GptStage> model_;
  std::unique_ptr<PipelineExecutor> executor_;
  Buffer nll_;
};

}  // namespace trident
