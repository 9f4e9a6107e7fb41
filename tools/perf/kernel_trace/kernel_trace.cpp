// A kernel timeline without Nsight Systems: a CUDA injection library (CUDA_INJECTION64_PATH) that
// records every kernel and memory copy through CUPTI's activity API and writes them, one line
// each, to $TRIDENT_KERNEL_TRACE.<rank>.csv (rank: OMPI_COMM_WORLD_RANK, else the process id):
//   K,start_ns,end_ns,device,stream,name      M,start_ns,end_ns,device,stream,bytes,kind
// tools/perf/kernel_trace/kernel_trace.py summarises a trace (GPU busy share, gaps, kernel durations).
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unistd.h>

namespace {

std::mutex mu;
FILE* out = nullptr;
constexpr size_t kBufferBytes = size_t(8) << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(mu);
  CUpti_Activity* record = nullptr;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(out, "K,%llu,%llu,%u,%u,%s\n", static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->deviceId, k->streamId, k->name ? k->name : "?");
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(out, "M,%llu,%llu,%u,%u,%llu,%u\n", static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->deviceId, m->streamId,
                   static_cast<unsigned long long>(m->bytes), static_cast<unsigned>(m->copyKind));
    }
  }
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(mu);
  if (out) std::fclose(out);
  out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* prefix = std::getenv("TRIDENT_KERNEL_TRACE");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string path = std::string(prefix ? prefix : "kernel_trace") + "." +
                           (rank ? std::string(rank) : std::to_string(getpid())) + ".csv";
  out = std::fopen(path.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path.c_str());
    return 0;
  }
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI refused the activity trace\n");
    return 0;
  }
  cuptiActivityFlushPeriod(500);
  std::atexit(finish);
  return 1;
}
