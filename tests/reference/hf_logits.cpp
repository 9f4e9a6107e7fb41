// Logits of a trident checkpoint on the CPU backend, one rank, for the Hugging Face conversion
// check (check_hf_convert.py): the model from the checkpoint's stored [model] section, the tokens
// (int32, B x T) from a file, the logits (fp32, B*T x vocab_size) to a file.
//   hf_logits CHECKPOINT TOKENS B T OUT
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

int run(char** argv) {
  const std::string file = argv[1];
  const int B = std::atoi(argv[3]), T = std::atoi(argv[4]);
  RunConfig c;
  c.model = parse_config_text(read_checkpoint_info(file).config, file).model;
  c.model.seq_len = T;
  c.train.micro_batch_size = B;
  c.train.global_batch_size = B;
  ParallelGroups g = test::mpi_groups(c, MPI_COMM_SELF);
  std::unique_ptr<Backend> be = make_cpu_backend();
  GptStage model(c.model, g, *be, B, 1, size_t{1} << 20, false);
  load_checkpoint(file, model, nullptr, g);

  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size(), 0);
  std::ifstream in(argv[2], std::ios::binary);
  in.read(reinterpret_cast<char*>(inputs.data()), static_cast<std::streamsize>(inputs.size() * sizeof(int32_t)));
  if (!in) {
    std::fprintf(stderr, "hf_logits: %s holds fewer than %d x %d int32 tokens\n", argv[2], B, T);
    return 2;
  }
  model.set_tokens(0, inputs.data(), targets.data());
  const std::vector<float> logits = model.forward_logits(0);
  std::ofstream out(argv[5], std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  return out ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 6) {
    std::fprintf(stderr, "usage: hf_logits CHECKPOINT TOKENS B T OUT\n");
    return 2;
  }
  const int status = run(argv);   // every MPI object is gone before MPI_Finalize
  MPI_Finalize();
  return status;
}
