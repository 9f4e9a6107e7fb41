// GpuTelemetry (trident/backend/backend.hpp) for one GPU: the SM clock, the power draw and the
// temperature read through NVML at start(), every kIntervalMs after it (a background thread) and
// at stop(), so even a short window has two samples. NVML comes with the driver
// (libnvidia-ml.so.1) and is loaded when first needed, so a build with CUDA still starts where
// there is no driver; without it stop() says so in `note`.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trident/backend/backend.hpp"

namespace trident::gpu {

class NvmlTelemetry {
 public:
  static constexpr int kIntervalMs = 50;

  explicit NvmlTelemetry(int device) : device_(device) {}
  ~NvmlTelemetry();
  NvmlTelemetry(const NvmlTelemetry&) = delete;
  NvmlTelemetry& operator=(const NvmlTelemetry&) = delete;

  void start();
  GpuTelemetry stop();

 private:
  struct Sample {
    unsigned sm_mhz, power_mw, temp_c;
  };
  bool open();   // loads NVML and finds the device, once; false (with why_) where it cannot
  Sample read() const;
  void run();

  int device_;
  bool tried_ = false;
  std::string why_;
  void* device_handle_ = nullptr;   // nvmlDevice_t; set once open() has found the device
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Sample> samples_;
};

}  // namespace trident::gpu
