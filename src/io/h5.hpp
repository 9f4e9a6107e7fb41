// Thin RAII and error helpers over the HDF5 C API for the checkpoint code.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trident::h5 {

// Owns an HDF5 identifier and closes it with the matching H5*close.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// HDF5 prints nothing itself; errors come back as return values that we turn into messages.
void silence_errors();

void write_attr(hid_t obj, const char* name, int64_t v);
void write_attr(hid_t obj, const char* name, uint64_t v);
void write_attr(hid_t obj, const char* name, double v);
void write_attr(hid_t obj, const char* name, const std::string& v);
// Return false when the attribute is missing or of another type.
bool read_attr(hid_t obj, const char* name, int64_t& v);
bool read_attr(hid_t obj, const char* name, uint64_t& v);
bool read_attr(hid_t obj, const char* name, double& v);
bool read_attr(hid_t obj, const char* name, std::string& v);

std::vector<int64_t> dataset_shape(hid_t dset);

}  // namespace trident::h5
