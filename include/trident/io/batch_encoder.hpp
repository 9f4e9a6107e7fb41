// BatchEncoder: tokenizes batches of documents on long-lived worker threads, in input order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trident/io/tokenizer.hpp"

namespace trident {

class BatchEncoder {
 public:
  // The workers live as long as the encoder, so the tokenizer's per-thread caches stay warm.
  BatchEncoder(const Tokenizer& tokenizer, int threads, bool append_eot);
  ~BatchEncoder();
  BatchEncoder(const BatchEncoder&) = delete;
  BatchEncoder& operator=(const BatchEncoder&) = delete;

  // Starts encoding `docs` and returns at once, so the caller can read the next batch
  // meanwhile. `docs` must stay untouched until wait() returns.
  void start(const std::vector<std::string>& docs);
  // Blocks until the batch is done; the token ids of each document, in input order: the
  // tokenizer's bos_id() if it has one, the text's ids, then eot_id() when append_eot.
  std::vector<std::vector<int32_t>>& wait();

 private:
  void work();

  const Tokenizer& tokenizer_;
  const bool append_eot_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t generation_ = 0;   // one per batch; workers wake when it changes
  int busy_ = 0;              // workers still on the current batch
  bool stop_ = false;
  const std::vector<std::string>* docs_ = nullptr;
  std::atomic<size_t> next_doc_{0};
  std::vector<std::vector<int32_t>> out_;
  std::exception_ptr error_;
};

}  // namespace trident
