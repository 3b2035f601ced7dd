// Streams a GGUF file whose tensor data is produced row range by row range, so models larger than
// memory (a 3B q4_K_M file is ~1.8 GiB) are written with bounded memory: at most one chunk of rows
// (≈ 16 Mi elements) of one tensor is in memory at a time.
//
// Layout (GGUF v3, as gguf::Writer and llama.cpp write it): header and metadata encoded by a
// gguf::Writer that holds no tensors, then the tensor infos (name, dims, type, offset), zero padding
// to the writer's alignment, and each tensor's data at an aligned offset in the order given, padded
// with zeros. The file is written to "<path>.part" and renamed over `path` when complete, so a
// failed run never leaves a truncated model behind.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "gguf/writer.hpp"

namespace rocky::synth {

struct StreamTensor {
  std::string name;
  DType type = DType::F32;
  uint32_t n_dims = 1;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // GGUF order, ne[0] = row length

  uint64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t n_bytes() const { return row_bytes(type, ne[0]) * rows(); }
};

// Writes rows [row0, row1) of tensor `index`, encoded in its type, to `dst`
// ((row1 − row0) · row_bytes(type, ne0) bytes). Called concurrently for disjoint row ranges.
using RowEncoder = std::function<void(size_t index, uint64_t row0, uint64_t row1, uint8_t* dst)>;

struct StreamOptions {
  unsigned threads = 0;  // 0: std::thread::hardware_concurrency()
  bool progress = true;  // a progress bar on stderr (when stderr is a terminal)
  std::string label;     // shown before the bar
};

// Writes the file; returns its size in bytes. rocky::Error (naming the path) on I/O failure; an
// exception thrown by `encode` is rethrown after the partial file is removed.
uint64_t write_streaming(const std::string& path, const gguf::Writer& meta, const std::vector<StreamTensor>& tensors,
                         const RowEncoder& encode, const StreamOptions& opt = {});

}  // namespace rocky::synth
