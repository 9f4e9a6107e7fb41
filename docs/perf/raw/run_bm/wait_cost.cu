// Run BM: what a satisfied stream wait costs between two kernels on one stream: N short kernels
// back to back; the same with a cuStreamWaitValue64 on a flag already set between each; with a
// cudaStreamWaitEvent on an event recorded on another (idle) stream; with a cuStreamWriteValue64.
// Prints microseconds per kernel for each. Build: nvcc -O2 -arch=sm_90 wait_cost.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

#define CK(x)                                                          \
  do {                                                                 \
    auto e_ = (x);                                                     \
    if (e_ != 0) {                                                     \
      std::printf("error %d at %s:%d\n", (int)e_, __FILE__, __LINE__); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main() {
  cudaStream_t s, other;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  uint64_t* flag;
  CK(cudaMalloc(&flag, 8));
  const uint64_t big = uint64_t(1) << 40;   // >= every value waited for (GEQ compares as signed)
  CK(cudaMemcpy(flag, &big, 8, cudaMemcpyHostToDevice));
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CK(cudaEventRecord(ev, other));
  CK(cudaDeviceSynchronize());
  const int n = 2000;
  for (long long cycles : {2000LL, 20000LL}) {   // ~1 us and ~10 us at 1.98 GHz
    for (int mode = 0; mode < 4; ++mode) {
      auto run = [&] {
        for (int i = 0; i < n; ++i) {
          spin<<<132, 128, 0, s>>>(cycles);
          if (mode == 1) cuStreamWaitValue64(s, reinterpret_cast<CUdeviceptr>(flag), 1, CU_STREAM_WAIT_VALUE_GEQ);
          if (mode == 2) cudaStreamWaitEvent(s, ev, 0);
          if (mode == 3) cuStreamWriteValue64(s, reinterpret_cast<CUdeviceptr>(flag), big, 0);
        }
      };
      run();
      CK(cudaStreamSynchronize(s));
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      cudaEventRecord(a, s);
      run();
      cudaEventRecord(b, s);
      CK(cudaStreamSynchronize(s));
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      const char* names[] = {"kernels only", "+ satisfied cuStreamWaitValue64", "+ cudaStreamWaitEvent (done event)",
                             "+ cuStreamWriteValue64"};
      std::printf("spin %6lld cycles: %-36s %8.3f us per kernel\n", cycles, names[mode], 1000.0 * ms / n);
    }
  }
  return 0;
}
