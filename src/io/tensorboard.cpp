// TensorBoard event files by hand: CRC-32C, TFRecord framing and the protocol-buffer wire format of
// the Event, Summary and Summary.Value fields a scalar needs.
#include "trident/io/tensorboard.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "trident/core/error.hpp"

namespace trident {

namespace {

// Reflected CRC-32C table (polynomial 0x82F63B78).
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol-buffer wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64,
// 2 length-delimited, 5 fixed32; fixed-width values little-endian.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <class T>
void put_fixed(std::string& out, T v) {   // the host is little-endian (x86-64, aarch64)
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event.wall_time = 1 (double), Event.step = 2 (int64).
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_varint(e, 1 << 3 | 1);
  put_fixed(e, wall_time);
  if (step != 0) {
    put_varint(e, 2 << 3 | 0);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = crc_table()[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string tfrecord(const std::string& data) {
  std::string r;
  const uint64_t length = data.size();
  put_fixed(r, length);
  put_fixed(r, masked_crc32c(r.data(), 8));
  r += data;
  put_fixed(r, masked_crc32c(data.data(), data.size()));
  return r;
}

std::string file_version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");   // Event.file_version = 3
  return e;
}

std::string scalar_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, v] : scalars) {
    std::string value;
    put_bytes(value, 1, tag);    // Summary.Value.tag = 1
    put_varint(value, 2 << 3 | 5);
    put_fixed(value, v);         // Summary.Value.simple_value = 2 (float)
    put_bytes(summary, 1, value);   // Summary.value = 1 (repeated)
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);   // Event.summary = 5
  return e;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(str("log.tensorboard = ", dir, ": cannot create the directory (", ec.message(), ")"));
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  path_ = str(dir, "/events.out.tfevents.", static_cast<int64_t>(now_seconds()), ".", host, ".", getpid());
  if (std::filesystem::exists(path_)) throw InputError(str("log.tensorboard: ", path_, " exists already; not overwriting it"));
  out_.open(path_, std::ios::binary);
  if (!out_) throw InputError(str("log.tensorboard = ", dir, ": cannot create ", path_, " (check permissions)"));
  out_ << tfrecord(file_version_event(now_seconds()));
  out_.flush();
}

void TensorBoardWriter::write(const StepStats& s) {
  if (!out_.is_open()) return;
  std::vector<std::pair<std::string, float>> scalars;
  auto add = [&](const char* tag, double v) {
    if (std::isfinite(v)) scalars.emplace_back(tag, static_cast<float>(v));
  };
  add("train/loss", s.loss);
  add("train/lr", s.lr);
  add("train/grad_norm", s.grad_norm);
  add("train/skipped_steps", s.skipped_steps);
  add("train/accuracy", s.accuracy);
  add("train/margin", s.margin);
  add("train/chosen_reward", s.chosen_reward);
  add("train/rejected_reward", s.rejected_reward);
  add("rl/reward", s.reward);
  add("rl/reward_std", s.reward_std);
  add("rl/kl", s.kl);
  add("rl/clip_fraction", s.clip_fraction);
  add("rl/entropy", s.entropy);
  add("rl/answer_tokens", s.answer_tokens);
  add("rl/answers_stopped", s.answers_stopped);
  add("rl/generation_s", s.generation_s);
  add("rl/value_loss", s.value_loss);
  add("rl/value_clip_fraction", s.value_clip_fraction);
  add("rl/value_mean", s.value_mean);
  add("rl/explained_variance", s.explained_variance);
  add("rl/kl_coef", s.kl_coef);
  add("val/loss", s.val_loss);
  add("val/accuracy", s.val_accuracy);
  if (!std::isfinite(s.val_accuracy)) add("val/ppl", std::exp(s.val_loss));   // token losses only
  add("perf/tokens_per_s", s.tokens_per_s);
  add("perf/step_ms", s.step_ms);
  add("perf/mfu", s.mfu);
  add("perf/peak_mem_gib", s.peak_mem_bytes / double(1 << 30));
  add("perf/comm_wait", s.comm_wait);
  out_ << tfrecord(scalar_event(now_seconds(), s.step, scalars));
  out_.flush();
}

}  // namespace trident
