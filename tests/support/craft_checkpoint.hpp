// Hand-made checkpoint-like HDF5 files (serial HDF5 C API) for tests of what `trident inspect`
// and read_checkpoint_info accept: attributes of any type and size, datasets of any declared shape.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trident::test {

class CraftedFile {
 public:
  explicit CraftedFile(const std::string& path)
      : file_(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) {}
  ~CraftedFile() { close(); }
  CraftedFile(const CraftedFile&) = delete;
  CraftedFile& operator=(const CraftedFile&) = delete;
  bool valid() const { return file_ >= 0; }
  void close() {
    if (file_ >= 0) H5Fclose(file_);
    file_ = -1;
  }

  // An attribute on the file of `elements` values (1: a scalar).
  void attr_int64(const char* name, int64_t v, hsize_t elements = 1) {
    std::vector<int64_t> values(elements, v);
    write_attr(name, H5T_NATIVE_INT64, elements, values.data());
  }
  void attr_uint64(const char* name, uint64_t v) { write_attr(name, H5T_NATIVE_UINT64, 1, &v); }
  void attr_string(const char* name, const std::string& v) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, v.empty() ? 1 : v.size());
    write_attr(name, type, 1, v.empty() ? "" : v.data());
    H5Tclose(type);
  }
  // The attributes a trident checkpoint carries, with a small valid configuration.
  void checkpoint_attrs() {
    attr_int64("format_version", 1);
    attr_int64("step", 2);
    attr_int64("consumed_samples", 16);
    attr_uint64("seed", 1234);
    attr_string("config", "[model]\nn_layer = 2\n");
    attr_string("layout", "dp=1 tp=1 pp=1 zero=0 schedule=1f1b");
  }
  // An fp32 dataset `group`/`name` of the given shape; nothing is written, so the file stays
  // small whatever the shape declares (storage is allocated late, on the first write).
  bool dataset(const std::string& group, const std::string& name, const std::vector<hsize_t>& dims) {
    if (H5Lexists(file_, group.c_str(), H5P_DEFAULT) <= 0) {
      const hid_t g = H5Gcreate2(file_, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (g < 0) return false;
      H5Gclose(g);
    }
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    if (space < 0) return false;
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    const std::string path = group + "/" + name;
    const hid_t d = H5Dcreate2(file_, path.c_str(), H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (d < 0) return false;
    H5Dclose(d);
    return true;
  }

 private:
  void write_attr(const char* name, hid_t type, hsize_t elements, const void* v) {
    if (H5Aexists(file_, name) > 0) H5Adelete(file_, name);
    const hid_t space = elements == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &elements, nullptr);
    const hid_t a = H5Acreate2(file_, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
      H5Awrite(a, type, v);
      H5Aclose(a);
    }
    H5Sclose(space);
  }

  hid_t file_;
};

}  // namespace trident::test
