// Fuzz target: the WAN batch decoder (wan/codec/codec.h), which reads bytes from
// other regions. Any input must give OK or a clear error, never a crash,
// an out-of-bounds access or an allocation past DecodeLimits; a batch it
// accepts must satisfy every promise the receiver relies on.
//
// The first input byte picks the entry point:
//   even  the rest is a whole batch as received (envelope, checksum, LZ4);
//   odd   the rest is a raw body parsed with a header taken from its first
//         bytes (ParseBody): a mutation of a whole batch rarely gets past
//         the checksum, so this reaches the record parser directly.
//
// Built with libFuzzer when the compiler is Clang (experiments/run_fuzz.sh),
// and with tests/fuzz/replay_main.cc otherwise (CTest: a fixed count of
// seeded mutations).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "wan/codec/codec.h"

namespace {

void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "batch decoder accepted a batch that breaks: %s\n", what);
  std::abort();
}

void CheckAccepted(const geops::wan::DecodedBatch& batch, const geops::wan::DecodeLimits& limits) {
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    const geops::wan::SparseChunkUpdate& u = batch.chunks[c];
    Require(u.num_elements > 0 && u.num_elements <= limits.max_chunk_elements, "chunk size within the limits");
    Require(!u.indices.empty(), "every chunk has a value");
    Require(u.indices.size() == u.values.size(), "as many indices as values");
    for (size_t i = 0; i < u.indices.size(); ++i) {
      Require(u.indices[i] < u.num_elements, "indices inside the chunk");
      Require(i == 0 || u.indices[i] > u.indices[i - 1], "indices strictly increasing");
      Require(std::isfinite(u.values[i]), "finite values");
    }
    Require(c == 0 || batch.chunks[c - 1].key < u.key, "chunks sorted by key, each once");
  }
  Require(batch.body_bytes <= limits.max_body_bytes, "body within the limits");
}

}  // namespace

// Seeds: real batches of every codec and index encoding, compressed and
// not, as whole batches (first byte 0), and their raw bodies (first byte 1).
std::vector<std::vector<uint8_t>> GeopsFuzzSeeds() {
  using geops::wan::SparseChunkUpdate;
  std::vector<std::vector<uint8_t>> seeds;
  std::vector<SparseChunkUpdate> chunks(3);
  chunks[0] = {geops::ChunkKey{0, 0}, 64, {}, {}};  // dense
  for (uint32_t i = 0; i < 64; ++i) {
    chunks[0].indices.push_back(i);
    chunks[0].values.push_back(0.01f * static_cast<float>(i) - 0.3f);
  }
  chunks[1] = {geops::ChunkKey{0, 1}, 4096, {3, 700, 4095}, {1.5f, -2.0f, 0.25f}};  // sparse
  chunks[2] = {geops::ChunkKey{1, 0}, 256, {}, {}};                                   // half
  for (uint32_t i = 0; i < 256; i += 2) {
    chunks[2].indices.push_back(i);
    chunks[2].values.push_back(static_cast<float>(i % 7) - 3.0f);
  }
  for (uint8_t codec = 0; codec < geops::wan::kNumValueCodecs; ++codec) {
    for (bool compress : {false, true}) {
      geops::wan::BatchEncoder encoder({.compress = compress});
      geops::wan::BatchHeader header{.origin = 1, .seq = 7, .clock = 3,
                                     .codec = static_cast<geops::wan::ValueCodec>(codec)};
      std::vector<uint8_t> batch;
      if (!encoder.Encode(header, chunks, &batch, nullptr).ok()) continue;
      if (!compress && batch.size() > geops::wan::batch_format::kHeaderSize) {
        // The raw body behind its codec and chunk count (first byte odd).
        std::vector<uint8_t> body = {1, codec, static_cast<uint8_t>(chunks.size()), 0};
        body.insert(body.end(), batch.begin() + geops::wan::batch_format::kHeaderSize, batch.end());
        seeds.push_back(std::move(body));
      }
      batch.insert(batch.begin(), uint8_t{0});
      seeds.push_back(std::move(batch));
    }
  }
  return seeds;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Small limits: the fuzzer looks for a crash, not for the largest batch.
  geops::wan::DecodeLimits limits;
  limits.max_batch_bytes = 1 << 20;
  limits.max_body_bytes = 4 << 20;
  limits.max_chunk_elements = 1 << 20;
  geops::wan::BatchDecoder decoder(limits);
  geops::wan::DecodedBatch out;
  std::span<const uint8_t> rest(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    if (decoder.Decode(rest, &out).ok()) CheckAccepted(out, limits);
    return 0;
  }
  if (rest.size() < 3) return 0;
  geops::wan::BatchHeader header;
  header.codec = static_cast<geops::wan::ValueCodec>(rest[0] % (geops::wan::kNumValueCodecs + 1));
  header.chunk_count = static_cast<uint32_t>(rest[1]) | (static_cast<uint32_t>(rest[2]) << 8);
  if (decoder.ParseBody(header, rest.subspan(3), &out).ok()) CheckAccepted(out, limits);
  return 0;
}
