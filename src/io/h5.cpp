// HDF5 handle ownership and scalar/string attributes.
#include "h5.hpp"

namespace trident::h5 {

void Handle::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
  id_ = H5I_INVALID_HID;
}

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

void write_scalar(hid_t obj, const char* name, hid_t type, const void* v) {
  Handle space(H5Screate(H5S_SCALAR));
  Handle attr(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  H5Awrite(attr.get(), type, v);
}

// H5Aread writes every element of the attribute: one that is not a single value (a crafted file)
// would overflow the caller's variable.
bool single_element(hid_t attr) {
  Handle space(H5Aget_space(attr));
  return space.valid() && H5Sget_simple_extent_npoints(space.get()) == 1;
}

bool read_scalar(hid_t obj, const char* name, hid_t type, void* v) {
  if (H5Aexists(obj, name) <= 0) return false;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT));
  return attr.valid() && single_element(attr.get()) && H5Aread(attr.get(), type, v) >= 0;
}

}  // namespace

void write_attr(hid_t obj, const char* name, int64_t v) { write_scalar(obj, name, H5T_NATIVE_INT64, &v); }
void write_attr(hid_t obj, const char* name, uint64_t v) { write_scalar(obj, name, H5T_NATIVE_UINT64, &v); }
void write_attr(hid_t obj, const char* name, double v) { write_scalar(obj, name, H5T_NATIVE_DOUBLE, &v); }

void write_attr(hid_t obj, const char* name, const std::string& v) {
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), v.empty() ? 1 : v.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  write_scalar(obj, name, type.get(), v.empty() ? "" : v.data());
}

bool read_attr(hid_t obj, const char* name, int64_t& v) { return read_scalar(obj, name, H5T_NATIVE_INT64, &v); }
bool read_attr(hid_t obj, const char* name, uint64_t& v) { return read_scalar(obj, name, H5T_NATIVE_UINT64, &v); }
bool read_attr(hid_t obj, const char* name, double& v) { return read_scalar(obj, name, H5T_NATIVE_DOUBLE, &v); }

bool read_attr(hid_t obj, const char* name, std::string& v) {
  if (H5Aexists(obj, name) <= 0) return false;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr.valid() || !single_element(attr.get())) return false;
  Handle type(H5Aget_type(attr.get()));
  // Fixed-length strings only (what write_attr writes), no longer than what the file stores, so
  // that a crafted size cannot make us allocate more than the file holds.
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0) return false;
  const size_t n = H5Tget_size(type.get());
  if (n == 0 || n > H5Aget_storage_size(attr.get())) return false;
  std::string buf(n, '\0');
  if (H5Aread(attr.get(), type.get(), buf.data()) < 0) return false;
  buf.resize(buf.find('\0') == std::string::npos ? n : buf.find('\0'));
  v = buf;
  return true;
}

std::vector<int64_t> dataset_shape(hid_t dset) {
  Handle space(H5Dget_space(dset));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return {};
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

}  // namespace trident::h5
