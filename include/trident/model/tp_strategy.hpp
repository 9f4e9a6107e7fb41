// How a stage's blocks run under tensor parallelism: one TpStrategy per mode (plain all-reduces,
// also tp = 1; fused partial sums with or without the split norm backward; sequence parallelism),
// and the half-micro-batch overlap (parallel.tp_overlap) as a forward strategy over either. The
// block's ops are the same under every strategy (block.hpp); a strategy decides which rows a
// row-wise op runs on, which collective sums a partial, and which GEMMs run beside it with what
// SM margin: the GPU's speed depends on those pairings, so each strategy keeps them in one place.
#pragma once

#include <functional>
#include <memory>

#include "trident/backend/backend.hpp"
#include "trident/model/block.hpp"
#include "trident/model/tp_regions.hpp"
#include "trident/parallel/comm.hpp"

namespace trident {

// What a forward strategy asks of the stage whose blocks it runs, for one micro-batch's slot
// (GptStage implements it). Blocks are numbered in the model chunk being run.
class BlockPass {
 public:
  virtual ~BlockPass() = default;
  virtual int n_blocks() const = 0;
  virtual int micro_batch() const = 0;   // B
  virtual int seq_len() const = 0;       // T
  virtual const BlockDims& dims() const = 0;
  virtual BlockShape shape(int rows) const = 0;
  // ParamFetch::need of block i's parameters; with need_ends_use() a need also ends the use of the
  // previous block's (ZeRO-3's reused gather buffers).
  virtual void need(int i) = 0;
  virtual bool need_ends_use() const = 0;
  // Starts bringing the parameters the forward reads after block i (ParamFetch::prefetch).
  virtual void prefetch_after(int i) = 0;
  virtual const BlockTensors& weights(int i) const = 0;
  virtual BlockActs acts(int i) const = 0;          // what block i's ops read and write
  virtual const BlockActs& saved(int i) const = 0;  // what the slot keeps of block i
  virtual TensorView input(int i) const = 0;        // the stage input (own rows under sequence
                                                    // parallelism) or block i - 1's output
  // Causal attention of `batch` sequences starting at row row0 (a.atty, a.lse from a.qkv).
  virtual void attend(const BlockActs& a, int batch, size_t row0) = 0;
  virtual TensorView partial() const = 0;   // sequence parallelism: an (N, C) row-parallel output
};

// A forward strategy: runs one micro-batch through the chunk's blocks and returns the last
// block's output (the stage's rows of it under sequence parallelism).
class TpForward {
 public:
  virtual ~TpForward() = default;
  virtual TensorView forward(BlockPass& pass) = 0;
};

// The GEMMs around one norm backward of a block (NormSite: LN2, the MLP's, or LN1, the
// attention's): `reads_dres` read the residual gradient the norm backward updates and run before
// it; `other` does not read it and may run before or after; `norm_bwd` is the norm backward,
// given the other rank's partial of its output gradient where the sum is fused.
enum class NormSite { mlp, attention };
struct NormBwdPart {
  NormSite site;
  std::function<void()> reads_dres, other;
  std::function<void(TensorView dout_peer, PeerRelease release)> norm_bwd;
};

// Rows view of an (N, width) activation: all of them, this rank's, or the other rank's (tp = 2).
using RowView = std::function<TensorView(TensorView v, size_t width)>;

// The parallel options that pick a strategy (GptStage::set_tp_*, ActivationOptions).
struct TpOptions {
  bool sequence_parallel = false;
  bool fused_sum = false;
  bool split_norm_bwd = false;
  int sm_margin = 0;   // parallel.tp_sm_margin (0 with tp = 1)
};

class TpStrategy : public TpForward {
 public:
  // rows: N = B*T of a micro-batch; C: the residual stream's width; tp_rank: this rank's place
  // in the TP group (parallel::Coord::tp); split_rows: whether the backward's norms run on own rows.
  TpStrategy(Backend& be, Comm& tp, int tp_rank, int rows, int C, const TpOptions& o, bool split_rows);
  ~TpStrategy() override = default;
  Backend& backend() const { return be_; }
  Comm& comm() const { return tp_; }
  int tp_rank() const { return rank_; }

  // ---- rows. The forward runs its row-wise ops (norms, residual adds) on own rows and the slots
  // keep those rows of the residual stream (sequence parallelism); the backward's norms run on own
  // rows (sequence parallelism, the split norm backward).
  virtual bool own_rows_forward() const { return false; }
  bool own_rows_backward() const { return split_rows_; }
  // This rank's [row0, row0 + rows) of an (N, width) activation, and the other rank's (tp = 2).
  // Empty views (statistics RMSNorm has none of) stay empty.
  TensorView my_rows(TensorView v, size_t width) const {
    return v.empty() ? v : v.slice(row0_ * width, rows_ * width);
  }
  TensorView peer_rows(TensorView v, size_t width) const {
    return v.empty() ? v : v.slice((row0_ == 0 ? rows_ : 0) * width, rows_ * width);
  }
  TensorView own_rows(TensorView v, size_t width) const { return own_rows_forward() ? my_rows(v, width) : v; }
  int own_row_count() const { return own_rows_forward() ? static_cast<int>(rows_) : N_; }
  TensorView bwd_rows(TensorView v, size_t width) const { return split_rows_ ? my_rows(v, width) : v; }
  int bwd_row_count() const { return split_rows_ ? static_cast<int>(rows_) : N_; }
  // The backward's rows of a residual-stream activation or norm statistics, which under
  // sequence parallelism the slot holds as those rows only.
  TensorView saved_rows(TensorView v, size_t width) const { return own_rows_forward() ? v : bwd_rows(v, width); }

  // ---- the forward's sums
  // Whether a forward TpSum is fused (BlockShape::fused_sum).
  virtual bool fused_sums() const { return false; }
  // The TP sum of the partial (N, C) v, started (null when tp = 1): all-reduced, or under
  // sequence parallelism reduce-scattered into own rows. Wait before v is read.
  virtual Request sum_over_tp(TensorView v);
  // Whether the row sums and gathers of sequence parallelism go between the pairs of ranks
  // (parallel.tp_fused_sum: TpSum::rows, PairExchange::gather_each_async), by rank.
  virtual bool exchanges_rows() const { return false; }
  // Under sequence parallelism, gathers every rank's own rows of the (N, C) v (else nothing).
  virtual void gather_rows(TensorView) {}
  // Sequence parallelism's reduce-scatter of v, (tp x rows, C) partial sums, into this rank's
  // rows [rank x rows, ...) of v, started (TpSum: the norm reading those rows finishes it).
  virtual TpSum start_row_sum(TensorView v, size_t rows);
  // The SM margin of GEMMs that run beside a forward TP sum (none beside a copy-engine transfer).
  virtual int margin_beside_sums() const { return margin_; }
  // Recomputes block i's forward from its complete input x up to the MLP activation into a
  // (parallel.recompute): the forward's ops on the same values.
  virtual void recompute(BlockPass& pass, int i, const BlockActs& a, TensorView x) = 0;

  // ---- the backward
  // The weight-gradient GEMMs run beside the TP sums (tp > 1), not inside the input-gradient
  // calls (tp = 1: nothing to hide).
  bool dw_beside_sums() const { return tp_.size() > 1; }
  // The TP sum of a norm's input gradient v (copy_to_tp_region's backward), which the norm
  // backward finishes (TpSum).
  virtual TpSum start_sum(TensorView v);
  // A norm's backward with its GEMMs (NormBwdPart) once its input gradient `dln` is out of the
  // GEMMs: the sum of dln, the GEMMs beside it, the norm backward; where the norm runs on own rows,
  // the gather of the updated rows of dres into `gather` (finished by finish_grad_gather).
  virtual void norm_backward(const NormBwdPart& part, TensorView dln, TensorView dres, Request& gather) = 0;
  // The MLP's first backward GEMM, op(rows, n) on n rows: all of them once `gather` is finished.
  virtual void mlp_out_backward(Request& gather, const std::function<void(const RowView&, int)>& op);
  // The gather of the other ranks' rows of the residual gradient dres (this rank's are final).
  void start_grad_gather(Request& gather, TensorView dres);
  void finish_grad_gather(Request& gather);

 protected:
  Backend& be_;
  Comm& tp_;
  const int rank_, N_, C_, margin_;
  const bool split_rows_;
  size_t rows_ = 0, row0_ = 0;   // this rank's rows where they are split
};

// The strategy of the options (sequence parallelism, else fused sums, else plain; tp = 1 plain).
std::unique_ptr<TpStrategy> make_tp_strategy(Backend& be, Comm& tp, int tp_rank, int rows, int C, const TpOptions& o);
// parallel.tp_overlap: the forward as two staggered half micro-batches over the sums of `tp`.
std::unique_ptr<TpForward> make_overlap_forward(TpStrategy& tp);

}  // namespace trident
