// `trident doctor`: launched exactly like training (same launcher, config and flags), it shows
// where every rank runs and checks what a run depends on: the layout against the world, GPUs per
// node, each communicator (a verified all-reduce and its bus bandwidth), parallel HDF5 in
// checkpoint.dir and its free space. Exit 0 when healthy, else 1 and one line per problem.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "auto_layout.hpp"
#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/io_probe.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/planner.hpp"

extern char** environ;

namespace po = boost::program_options;

namespace trident {

namespace {

constexpr double kGiB = double(1 << 30);

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Where one rank runs; gathered on rank 0 for the host table and the rank map.
struct Placement {
  char host[64];
  int local_rank, local_size, gpus;
};

// Diagnosis lines found by this rank. report() prints the union over all ranks on rank 0 (on
// stdout, after the report they explain), each distinct line once, in rank order.
class Problems {
 public:
  void add(const std::string& line) { lines_ += line + "\n"; }

  // Collective: the number of distinct problems over all ranks (the same on every rank).
  int report(MPI_Comm world) const {
    const std::string all = gather_text_at_0(lines_, world);
    int distinct = 0;
    if (comm_rank(world) == 0) {
      std::set<std::string> seen;
      std::istringstream in(all);
      for (std::string line; std::getline(in, line);)
        if (seen.insert(line).second) log_info("trident doctor: problem: " + line);
      distinct = static_cast<int>(seen.size());
    }
    return broadcast_from_0(distinct, world);
  }

 private:
  std::string lines_;
};

std::string mpi_library() {
  const std::string v = mpi_library_version();
  return v.substr(0, v.find_first_of("\n,"));
}

// NCCL, CUDA and OpenMP settings of rank 0, which decide much of what the checks measure.
std::string relevant_environment() {
  std::string out;
  for (char** e = environ; *e; ++e)
    for (const char* prefix : {"NCCL_", "CUDA_VISIBLE_DEVICES=", "OMP_NUM_THREADS=", "UCX_"})
      if (!std::strncmp(*e, prefix, std::strlen(prefix))) out += std::string(" ") + *e;
  return out.empty() ? " (no NCCL_*, UCX_*, CUDA_VISIBLE_DEVICES or OMP_NUM_THREADS set)" : out;
}

std::vector<Placement> gather_placement(const NodeInfo& node, MPI_Comm world) {
  Placement mine{};
  std::snprintf(mine.host, sizeof mine.host, "%s", node.host.c_str());
  mine.local_rank = node.local_rank;
  mine.local_size = node.local_size;
  mine.gpus = visible_gpus();
  return all_gather(mine, world);
}

void print_placement(const std::vector<Placement>& ranks, const RunConfig& cfg, bool layout_ok, bool cuda) {
  std::vector<std::string> hosts;
  std::string table = "hosts:\n  host                             ranks  GPUs";
  for (const Placement& p : ranks) {
    if (std::find(hosts.begin(), hosts.end(), p.host) != hosts.end()) continue;
    hosts.push_back(p.host);
    char line[128];
    std::snprintf(line, sizeof line, "\n  %-32s %5d %5d", p.host, p.local_size, p.gpus);
    table += line;
  }
  log_info(table);
  std::string map = "ranks:\n   rank  host                             local  GPU   tp  pp  dp";
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Placement& p = ranks[r];
    std::string gpu = !cuda ? "-" : p.gpus > 0 ? std::to_string(p.local_rank % p.gpus) : "none";
    std::string coord = "   -   -   -";
    if (layout_ok) {
      Coord c = Topology(cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp).coord_of(static_cast<int>(r));
      char buf[32];
      std::snprintf(buf, sizeof buf, "%4d%4d%4d", c.tp, c.pp, c.dp);
      coord = buf;
    }
    char line[160];
    std::snprintf(line, sizeof line, "\n  %5zu  %-32s %5d  %-4s%s", r, p.host, p.local_rank, gpu.c_str(),
                  coord.c_str());
    map += line;
  }
  log_info(map);
}

// All-reduce of a known integer pattern (exact in fp32) over c: verified once, then timed.
void check_all_reduce(Comm& c, Backend& be, size_t count, int iters, MPI_Comm world, Problems& problems) {
  Buffer buf(be, count * sizeof(float));
  TensorView v = buf.view(DType::F32).slice(0, count);
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(c.rank() % 13 + i % 5);
  be.copy_from_host(v, host.data());
  c.all_reduce(v.data, count, DType::F32, ReduceOp::Sum, be.stream());
  be.copy_to_host(host.data(), v);
  const int n = c.size();
  int base = 0;
  for (int r = 0; r < n; ++r) base += r % 13;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != static_cast<float>(base + n * static_cast<int>(i % 5));

  be.synchronize();
  barrier(world);
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) c.all_reduce(v.data, count, DType::F32, ReduceOp::Sum, be.stream());
  be.synchronize();
  const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  const double slowest = all_reduce(mine, HostReduce::Max, world);
  const bool ok = all_true(wrong == 0, world);
  if (wrong)
    problems.add(str("all-reduce over the ", c.name(), " communicator gave ", wrong, " wrong values of ", count, " (", n,
                     " ranks)"));

  const double bytes = static_cast<double>(count) * sizeof(float);
  char line[160];
  if (n == 1)
    std::snprintf(line, sizeof line, "  %-6s %5d rank   %s", c.name().c_str(), n,
                  ok ? "ok (nothing to exchange)" : "WRONG");
  else
    std::snprintf(line, sizeof line, "  %-6s %5d ranks  %-5s %9.3f ms  busbw %8.2f GB/s", c.name().c_str(), n,
                  ok ? "ok" : "WRONG", 1e3 * slowest, 2.0 * (n - 1) / n * bytes / slowest / 1e9);
  log_info(line);
}

void check_communicators(const RunConfig& cfg, MPI_Comm world, double mib, int iters, Problems& problems) {
  Runtime rt = make_runtime(cfg, world);
  const size_t count = static_cast<size_t>(mib * (1 << 20) / sizeof(float));
  log_info(str("all-reduce (fp32, ", mib, " MiB, ", rt.backend->name(), " memory, ", iters,
               " timed iterations; busbw = 2(n-1)/n * bytes / time of the slowest rank):"));
  for (Comm* c : {rt.groups.tp.get(), rt.groups.pp.get(), rt.groups.dp.get(), rt.groups.world.get()})
    check_all_reduce(*c, *rt.backend, count, iters, world, problems);
}

// checkpoint.dir: writable on every rank, parallel HDF5 works there, and it has room for a checkpoint.
void check_checkpoint_dir(const RunConfig& cfg, bool config_ok, double io_mib, const std::string& host,
                          MPI_Comm world, Problems& problems) {
  const std::string& dir = cfg.checkpoint.dir;
  if (dir.empty()) {
    log_info("checkpoint.dir: not set; checkpoint checks skipped (pass --checkpoint.dir DIR to check it)");
    return;
  }
  bool writable = true;
  try {
    prepare_checkpoint_dir(dir);
  } catch (const InputError& e) {
    problems.add(str(e.what(), " (on ", host, ")"));
    writable = false;
  }
  if (!all_true(writable, world)) {
    log_info(str("checkpoint.dir ", dir, ": not writable everywhere; parallel HDF5 check skipped"));
    return;
  }
  IoProbeResult io = probe_parallel_hdf5(dir, world, static_cast<size_t>(io_mib * (1 << 20)));
  if (!io.error.empty()) {
    problems.add(str("checkpoint.dir ", dir, ": ", io.error));
  } else {
    log_info(str("checkpoint.dir ", dir, ": parallel HDF5 ok, ", fixed(io.bytes / (1 << 20), 0),
                 " MiB written collectively at ", fixed(io.bytes / io.write_s / 1e9, 2), " GB/s, read back at ",
                 fixed(io.bytes / io.read_s / 1e9, 2), " GB/s"));
  }
  if (!config_ok) return;   // the parameter count needs a valid model
  const double params = static_cast<double>(logical_param_count(cfg.model));
  const double need = 16 * params;   // fp32 weights, master, exp_avg and exp_avg_sq of every parameter
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) {
    problems.add(str("checkpoint.dir ", dir, ": cannot read the free space on ", host, " (", ec.message(), ")"));
    return;
  }
  const double free_bytes = static_cast<double>(space.available);
  if (free_bytes < need)
    problems.add(str("checkpoint.dir ", dir, " has ", fixed(free_bytes / kGiB, 2), " GiB free on ", host,
                     "; one checkpoint needs ", fixed(need / kGiB, 2), " GiB (", static_cast<long long>(params),
                     " parameters x 16 B)"));
  log_info(str("disk: ", fixed(free_bytes / kGiB, 1), " GiB free in ", dir, "; one checkpoint takes ",
               fixed(need / kGiB, 3), " GiB (", static_cast<long long>(params), " parameters x 16 B: fp32 weights, "
               "master, exp_avg, exp_avg_sq); checkpoint.keep = ", cfg.checkpoint.keep, " of them take ",
               fixed(cfg.checkpoint.keep * need / kGiB, 3), " GiB"));
}

}  // namespace

int cmd_doctor(const Args& args) {
  double mib = 0, io_mib = 16;
  int iters = 5;
  po::options_description extra("Doctor");
  extra.add_options()
      ("allreduce-mib", po::value<double>(&mib)->default_value(0),
       "all-reduce message size in MiB (0: 256 on GPUs, 8 on CPU ranks)")
      ("iters", po::value<int>(&iters)->default_value(iters), "timed all-reduce iterations per communicator")
      ("io-mib", po::value<double>(&io_mib)->default_value(io_mib), "MiB each rank writes in the parallel HDF5 check");
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: mpirun ... trident doctor [--config FILE]... [--section.key VALUE]...\n\n" +
             run_options_help(&extra, {"backend", "model.", "parallel.", "train.micro_batch_size",
                                       "train.global_batch_size", "checkpoint.dir", "checkpoint.keep", "cuda."}));
    return 0;
  }
  if (mib < 0 || iters < 1 || io_mib <= 0)
    throw InputError("--allreduce-mib must be >= 0, --iters >= 1 and --io-mib > 0");

  RunConfig cfg = parsed.cfg;
  MPI_Comm world = MPI_COMM_WORLD;
  const int size = comm_size(world);
  Problems problems;
  const NodeInfo node = node_info(world);
  const bool cuda = uses_cuda(cfg);
  if (mib == 0) mib = cuda ? 256 : 8;

  // The layout training would use: parallel.auto applied the same way, then validated.
  bool layout_ok = true;
  try {
    apply_auto_layout(cfg, world);
    validate_run_config(cfg, size);
  } catch (const InputError& e) {
    problems.add(e.what());
    layout_ok = false;
  }
  const std::vector<Placement> ranks = gather_placement(node, world);
  int n_hosts = 0;
  for (const Placement& p : ranks) n_hosts += p.local_rank == 0;
  log_info(str("trident doctor: ", size, " ranks on ", n_hosts, n_hosts == 1 ? " host" : " hosts", "; backend ",
               cuda ? "cuda" : "cpu", " (backend = ", cfg.backend, "); ", mpi_library(), "; ", hdf5_version()));
  log_info(str("layout: ", layout_ok ? str("dp=", cfg.parallel.dp, " tp=", cfg.parallel.tp, " pp=", cfg.parallel.pp,
                                           " zero=", cfg.parallel.zero, " schedule=", cfg.parallel.schedule)
                                     : std::string("invalid (see the problems below)")));
  log_info("environment:" + relevant_environment());
  print_placement(ranks, cfg, layout_ok, cuda);

  bool placement_ok = true;
  if (cuda && visible_gpus() == 0) {
    problems.add(str("host ", node.host, ": backend cuda but no GPU is visible (driver, CUDA_VISIBLE_DEVICES, or a "
                     "trident built without CUDA); use --backend cpu"));
    placement_ok = false;
  } else if (cuda && node.local_size > visible_gpus()) {
    problems.add(str("host ", node.host, " runs ", node.local_size, " ranks but has ", visible_gpus(),
                     " GPUs; launch one rank per GPU (e.g. mpirun --map-by ppr:", visible_gpus(),
                     ":node) or use --backend cpu"));
    placement_ok = false;
  }
  if (all_true(layout_ok && placement_ok, world)) {
    try {
      check_communicators(cfg, world, mib, iters, problems);
    } catch (const InputError& e) {   // thrown on every rank alike by make_runtime
      problems.add(e.what());
    }
  } else {
    log_info("communicators: not built (fix the layout and placement problems first)");
  }
  check_checkpoint_dir(cfg, layout_ok, io_mib, node.host, world, problems);

  const int n = problems.report(world);
  log_info(n == 0 ? "trident doctor: healthy" : str("trident doctor: ", n, n == 1 ? " problem" : " problems"));
  return n == 0 ? 0 : 1;
}

}  // namespace trident
