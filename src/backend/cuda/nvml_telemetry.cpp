// The NVML reads behind NvmlTelemetry: the library loaded by name, the device found by PCI
// address, one sampling thread per window.
#include "nvml_telemetry.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>

#include "trident/core/error.hpp"

namespace trident::gpu {
namespace {

// The NVML entry points used, as the NVML API reference declares them (nvml.h is not part of
// the toolkit here; the library is the driver's). Return 0 is NVML_SUCCESS; clock type 1 is
// NVML_CLOCK_SM; sensor 0 is NVML_TEMPERATURE_GPU; power is in milliwatts.
struct Nvml {
  using Init = int (*)();
  using HandleByPciBusId = int (*)(const char*, void**);
  using ClockInfo = int (*)(void*, int, unsigned*);
  using PowerUsage = int (*)(void*, unsigned*);
  using Temperature = int (*)(void*, int, unsigned*);
  Init init = nullptr;
  HandleByPciBusId handle_by_pci_bus_id = nullptr;
  ClockInfo clock_info = nullptr;
  PowerUsage power_usage = nullptr;
  Temperature temperature = nullptr;
  std::string error;   // empty once loaded and initialized

  static const Nvml& get() {
    static const Nvml nvml;
    return nvml;
  }

 private:
  Nvml() {
    // Loaded for the process's lifetime (never closed: NVML keeps its own state).
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "libnvidia-ml.so.1 (the driver's NVML) not found";
      return;
    }
    init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    handle_by_pci_bus_id = reinterpret_cast<HandleByPciBusId>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_info = reinterpret_cast<ClockInfo>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power_usage = reinterpret_cast<PowerUsage>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    temperature = reinterpret_cast<Temperature>(dlsym(lib, "nvmlDeviceGetTemperature"));
    if (!init || !handle_by_pci_bus_id || !clock_info || !power_usage) {
      error = "libnvidia-ml.so.1 lacks an entry point used here";
      return;
    }
    const int status = init();
    if (status != 0) error = str("nvmlInit failed (NVML error ", status, ")");
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

NvmlTelemetry::~NvmlTelemetry() {
  if (thread_.joinable()) static_cast<void>(stop());
}

bool NvmlTelemetry::open() {
  if (tried_) return device_handle_ != nullptr;
  tried_ = true;
  const Nvml& nvml = Nvml::get();
  if (!nvml.error.empty()) {
    why_ = nvml.error;
    return false;
  }
  // NVML numbers devices by PCI address, not by CUDA_VISIBLE_DEVICES' order.
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device_) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    why_ = str("no PCI bus id for CUDA device ", device_);
    return false;
  }
  const int status = nvml.handle_by_pci_bus_id(bus_id, &device_handle_);
  if (status != 0) {
    why_ = str("NVML does not know device ", bus_id, " (NVML error ", status, ")");
    device_handle_ = nullptr;
    return false;
  }
  return true;
}

// A failed read leaves its value 0; such samples are left out in stop().
NvmlTelemetry::Sample NvmlTelemetry::read() const {
  const Nvml& nvml = Nvml::get();
  Sample s{0, 0, 0};
  nvml.clock_info(device_handle_, 1, &s.sm_mhz);
  nvml.power_usage(device_handle_, &s.power_mw);
  if (nvml.temperature) nvml.temperature(device_handle_, 0, &s.temp_c);
  return s;
}

void NvmlTelemetry::start() {
  TRIDENT_CHECK(!thread_.joinable(), "device sampling: start() twice");
  samples_.clear();
  if (!open()) return;
  samples_.push_back(read());
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void NvmlTelemetry::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(kIntervalMs), [this] { return stopping_; }))
    samples_.push_back(read());
}

GpuTelemetry NvmlTelemetry::stop() {
  GpuTelemetry out;
  if (!thread_.joinable()) {
    out.note = why_.empty() ? "not sampled" : why_;
    return out;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  samples_.push_back(read());
  // Clock and power are kept apart: a device that reports no power still reports its clock.
  std::vector<double> mhz, watts;
  for (const Sample& s : samples_) {
    if (s.sm_mhz > 0) mhz.push_back(s.sm_mhz);
    if (s.power_mw > 0) watts.push_back(s.power_mw / 1000.0);
    out.temp_c_max = std::max(out.temp_c_max, static_cast<double>(s.temp_c));
  }
  out.count = static_cast<int>(mhz.size());
  if (out.count == 0) {
    out.note = "NVML returned no SM clock";
    return out;
  }
  out.sm_mhz_median = median(mhz);
  out.sm_mhz_min = *std::min_element(mhz.begin(), mhz.end());
  if (!watts.empty()) out.power_w_median = median(watts);
  return out;
}

}  // namespace trident::gpu
