// The doctor's parallel-HDF5 probe: a collective write and read-back through the MPI-IO driver,
// as a checkpoint does. Reading another rank's slab shows the file is one shared file.
#include "trident/io/io_probe.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "h5.hpp"
#include "trident/core/error.hpp"
#include "trident/parallel/host_collectives.hpp"

namespace trident {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string probe_path(const std::string& dir, MPI_Comm comm) {
  char name[64] = {0};
  if (comm_rank(comm) == 0) std::snprintf(name, sizeof name, "/.trident_doctor_%ld.h5", static_cast<long>(getpid()));
  broadcast_bytes(name, sizeof name, comm);
  return dir + name;
}

h5::Handle mpio_access(MPI_Comm comm) {
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL);
  return fapl;
}

h5::Handle collective_transfer() {
  h5::Handle dxpl(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

// Selects rank `owner`'s slab of n elements in the dataset's file space.
h5::Handle slab(hid_t dset, int owner, hsize_t n) {
  h5::Handle space(H5Dget_space(dset));
  hsize_t start = static_cast<hsize_t>(owner) * n, count = n;
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  return space;
}

}  // namespace

IoProbeResult probe_parallel_hdf5(const std::string& dir, MPI_Comm comm, size_t bytes_per_rank) {
  h5::silence_errors();
  const int rank = comm_rank(comm), size = comm_size(comm);
  const hsize_t n = std::max<size_t>(1, bytes_per_rank / sizeof(double)), total = n * size;
  const std::string path = probe_path(dir, comm);
  IoProbeResult r;
  r.bytes = static_cast<double>(total) * sizeof(double);
  // Element i of the file holds i: exact in a double, and each slab differs from the others.
  std::vector<double> mine(n), theirs(n);
  for (hsize_t i = 0; i < n; ++i) mine[i] = static_cast<double>(rank * n + i);

  barrier(comm);
  auto t0 = std::chrono::steady_clock::now();
  {
    h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, mpio_access(comm).get()));
    if (!all_true(file.valid(), comm)) {
      r.error = str("parallel HDF5 cannot create ", path, " through MPI-IO");
      return r;
    }
    h5::Handle space(H5Screate_simple(1, &total, nullptr));
    h5::Handle dset(H5Dcreate2(file.get(), "probe", H5T_NATIVE_DOUBLE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT));
    h5::Handle mem(H5Screate_simple(1, &n, nullptr));
    const bool wrote = all_true(dset.valid(), comm) &&
                       H5Dwrite(dset.get(), H5T_NATIVE_DOUBLE, mem.get(), slab(dset.get(), rank, n).get(),
                                collective_transfer().get(), mine.data()) >= 0;
    if (!all_true(wrote, comm)) r.error = str("parallel HDF5 collective write to ", path, " failed");
  }
  barrier(comm);
  r.write_s = seconds_since(t0);

  if (r.error.empty()) {
    const int other = (rank + 1) % size;
    t0 = std::chrono::steady_clock::now();
    h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, mpio_access(comm).get()));
    h5::Handle dset(file.valid() ? H5Dopen2(file.get(), "probe", H5P_DEFAULT) : H5I_INVALID_HID);
    h5::Handle mem(H5Screate_simple(1, &n, nullptr));
    bool read = all_true(dset.valid(), comm) &&
                H5Dread(dset.get(), H5T_NATIVE_DOUBLE, mem.get(), slab(dset.get(), other, n).get(),
                        collective_transfer().get(), theirs.data()) >= 0;
    bool same = read;
    for (hsize_t i = 0; same && i < n; ++i) same = theirs[i] == static_cast<double>(other * n + i);
    if (!all_true(read, comm))
      r.error = str("parallel HDF5 cannot read back ", path);
    else if (!all_true(same, comm))
      r.error = str("parallel HDF5 read back other data than the ranks wrote to ", path,
                    " (is checkpoint.dir on a file system shared by every node?)");
    barrier(comm);
    r.read_s = seconds_since(t0);
  }

  int removed = 1;
  if (rank == 0) removed = std::remove(path.c_str()) == 0;
  removed = broadcast_from_0(removed, comm);
  if (!removed && r.error.empty()) r.error = str("cannot remove the probe file ", path);
  return r;
}

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return str("HDF5 ", major, ".", minor, ".", release);
}

}  // namespace trident
