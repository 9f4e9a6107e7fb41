// Logits of a trident checkpoint on the CPU backend, one rank, for the Hugging Face conversion
// checks (check_hf_convert.py, check_transformers.py): the model from the checkpoint's stored
// [model] section, the tokens (int32, B x T) from a file, the logits (fp32, B*T x vocab_size) to a
// file. A reward model's checkpoint (task = reward) needs TARGETS (int32, B x T, -1 untrained, B
// even) and writes its scores (fp32, B), each read where trident reads it: the token after the
// row's last trained target (Backend::reward_fwd).
//   hf_logits CHECKPOINT TOKENS B T OUT [TARGETS]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/model/gpt.hpp"

using namespace trident;

namespace {

// out.size() int32 values from the file at `path`; false if it holds fewer.
bool read_ints(const char* path, std::vector<int32_t>& out) {
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(int32_t)));
  return static_cast<bool>(in);
}

int run(int argc, char** argv) {
  const std::string file = argv[1];
  const int B = std::atoi(argv[3]), T = std::atoi(argv[4]);
  const RunConfig stored = parse_config_text(read_checkpoint_info(file).config, file);
  RunConfig c;
  c.model = stored.model;
  c.task = stored.task;   // task = reward gives the model its score head
  c.model.seq_len = T;
  c.train.micro_batch_size = B;
  c.train.global_batch_size = B;
  ParallelGroups g = test::mpi_groups(c, MPI_COMM_SELF);
  std::unique_ptr<Backend> be = make_cpu_backend();
  GptStage model(c.model, g, *be, B, 1, size_t{1} << 20, false);
  load_checkpoint(file, model, nullptr, g);

  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size(), 0);
  for (int i : {2, 6}) {
    if (i >= argc) continue;
    if (!read_ints(argv[i], i == 2 ? inputs : targets)) {
      std::fprintf(stderr, "hf_logits: %s holds fewer than %d x %d int32 values\n", argv[i], B, T);
      return 2;
    }
  }
  if (c.model.score_head != (argc == 7)) {
    std::fprintf(stderr, "hf_logits: TARGETS is given for a reward model's checkpoint, and only for one\n");
    return 2;
  }
  model.set_tokens(0, inputs.data(), targets.data());
  std::vector<float> logits;
  if (c.model.score_head) {
    model.forward(0, false, 0.0f, UnitDone{});
    logits = model.last_scores();
  } else {
    logits = model.forward_logits(0);
  }
  std::ofstream out(argv[5], std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  return out ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: hf_logits CHECKPOINT TOKENS B T OUT [TARGETS]\n");
    return 2;
  }
  const int status = run(argc, argv);   // every MPI object is gone before MPI_Finalize
  MPI_Finalize();
  return status;
}
