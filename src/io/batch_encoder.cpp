// BatchEncoder: a small fixed pool; workers pull documents one at a time from a shared counter,
// which balances uneven document sizes without any partitioning.
#include "trident/io/batch_encoder.hpp"

#include <utility>

namespace trident {

BatchEncoder::BatchEncoder(const Tokenizer& tokenizer, int threads, bool append_eot)
    : tokenizer_(tokenizer), append_eot_(append_eot) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

BatchEncoder::~BatchEncoder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void BatchEncoder::start(const std::vector<std::string>& docs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    docs_ = &docs;
    out_.assign(docs.size(), {});
    next_doc_ = 0;
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
}

std::vector<std::vector<int32_t>>& BatchEncoder::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return busy_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return out_;
}

void BatchEncoder::work() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      // Stopping wins over a batch not yet picked up: only the destructor stops, nobody waits.
      if (stop_) return;
      seen = generation_;
    }
    try {
      for (size_t i; (i = next_doc_++) < docs_->size();) {
        std::vector<int32_t>& ids = out_[i] = tokenizer_.encode((*docs_)[i]);
        if (tokenizer_.bos_id() >= 0) ids.insert(ids.begin(), tokenizer_.bos_id());
        if (append_eot_) ids.push_back(tokenizer_.eot_id());
      }
    } catch (...) {
      // Out of memory on a huge document, typically; wait() rethrows it on the caller's thread.
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_ == 0) done_cv_.notify_one();
  }
}

}  // namespace trident
