// Rank 0 receives every rank's flat parameters as fp32 and places each element at its global
// index; layouts of other ranks are recomputed (they are pure functions of the coordinates).
#include "trident/train/gather.hpp"

#include <cmath>

#include "trident/parallel/host_transfer.hpp"

namespace trident {

GatheredParams gather_params(const GptStage& model, const ParallelGroups& g) {
  if (!model.params().empty()) return gather_like_params(model, model.params(), g);
  // ZeRO-3: gathered from the DP shards first.
  Buffer whole(model.backend(), model.layout().total() * dtype_size(model.backend().compute_dtype()));
  const TensorView flat = whole.view(model.backend().compute_dtype()).slice(0, model.layout().total());
  model.copy_params(flat);
  return gather_like_params(model, flat, g);
}

GatheredParams gather_like_params(const GptStage& model, TensorView flat, const ParallelGroups& g) {
  Backend& be = model.backend();
  const ParamLayout& mine = model.layout();
  std::vector<float> local(mine.total());
  {
    Buffer staging(be, mine.total() * sizeof(float));
    TensorView f32 = staging.view(DType::F32).slice(0, mine.total());
    be.copy(f32, flat);
    be.copy_to_host(local.data(), f32);
  }
  GatheredParams out;
  if (g.rank != 0) {
    send_floats(g, 0, local);
    return out;
  }
  const ModelConfig& m = model.config();
  std::map<std::string, std::vector<char>> placed;
  for (int r = 0; r < g.topo.world(); ++r) {
    Coord c = g.topo.coord_of(r);
    ParamLayout layout(m, StageInfo::of(m, c.pp, g.topo.pp(), model.stage().n_chunks), g.topo.tp(), c.tp, g.topo.dp(),
                       mine.bucket_elems());
    std::vector<float> data;
    if (r == 0) {
      data = local;
    } else {
      data.resize(layout.total());
      recv_floats(g, r, data);
    }
    for (const ParamInfo& p : layout.params()) {
      size_t n = 1;
      for (int64_t d : p.global_shape) n *= static_cast<size_t>(d);
      std::vector<float>& dst = out.tensors[p.name];
      std::vector<char>& have = placed[p.name];
      dst.resize(n);
      have.resize(n, 0);
      for (size_t i = 0; i < p.numel; ++i) {
        int64_t gi = p.global_index(i);
        if (gi < 0) continue;
        float v = data[p.offset + i];
        if (have[gi]) out.max_replica_diff = std::max(out.max_replica_diff, std::fabs(double(dst[gi]) - v));
        dst[gi] = v;
        have[gi] = 1;
      }
    }
  }
  return out;
}

}  // namespace trident
