// Event-pair timing of stream regions (see trident/gpu/profiler.hpp).
#include "trident/gpu/profiler.hpp"

#include <algorithm>
#include <map>

#include "trident/core/error.hpp"

namespace trident::gpu {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) TRIDENT_FATAL(str("profiler: ", what, ": ", cudaGetErrorString(err)));
}

}  // namespace

Profiler& Profiler::instance() {
  static Profiler p;
  return p;
}

int Profiler::record(cudaStream_t stream) {
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
  }
  check(cudaEventRecord(events_[used_], stream), "cudaEventRecord");
  return static_cast<int>(used_++);
}

int Profiler::begin(cudaStream_t stream) {
  if (!enabled_) return -1;
  std::lock_guard<std::mutex> lock(mutex_);
  return record(stream);
}

void Profiler::end(int token, cudaStream_t stream, std::string name) {
  if (token < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  regions_.push_back(Region{std::move(name), token, record(stream)});
}

std::vector<OpTime> Profiler::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, OpTime> by_name;
  for (const Region& r : regions_) {
    check(cudaEventSynchronize(events_[r.end]), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, events_[r.begin], events_[r.end]), "cudaEventElapsedTime");
    OpTime& t = by_name[r.name];
    t.name = r.name;
    t.calls += 1;
    t.ms += ms;
  }
  regions_.clear();
  used_ = 0;
  std::vector<OpTime> out;
  for (auto& entry : by_name) out.push_back(entry.second);
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return out;
}

ProfileScope::~ProfileScope() {
  if (token_ < 0) return;
  std::string name = op_;
  for (long v : {a_, b_, c_})
    if (v) name += (name.size() == std::string(op_).size() ? " " : "x") + std::to_string(v);
  Profiler::instance().end(token_, stream_, std::move(name));
}

}  // namespace trident::gpu
