// The WAN batch codec: turns a set of sparse chunk updates into one
// self-describing batch and back.
//
// Per chunk the encoder quantises the values with the batch's ValueCodec
// (quantize.h), stores which elements are present as a bitmap, as
// delta-varints or as Rice-coded gaps (whichever is smallest; nothing when
// the chunk is dense, sparse_index.h) behind a varint record head, and the
// envelope (batch_envelope.h) LZ4-compresses the body and adds a
// checksummed header. The quantisation error comes back to the caller as
// residual updates (error feedback): for every input element,
// decoded + residual == input exactly in float, so adding the residuals back
// into the accumulator loses nothing. Wire layout: docs/wan_batch_format.md.
//
// The decoder trusts nothing: every size, count, index and value is checked
// before use and a bad batch gives a clear error naming the field:
//   InvalidArgument  malformed or unsupported content (magic, version,
//                    codec, counts, indices, non-finite values, ...)
//   DataLoss         integrity failures (length, checksum, LZ4 block,
//                    decompressed size)
//   ResourceExhausted  a size beyond the receiver's DecodeLimits
//
// Thread-safety: BatchEncoder and BatchDecoder hold scratch buffers and are
// thread-compatible: use one object per thread.
#ifndef GEOPS_WAN_CODEC_CODEC_H_
#define GEOPS_WAN_CODEC_CODEC_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"
#include "wan/codec/batch_envelope.h"
#include "wan/codec/batch_format.h"
#include "wan/codec/sparse_update.h"

namespace geops::wan {

struct EncoderOptions {
  bool compress = true;      // LZ4 over the body; kept raw when LZ4 does not shrink it
  int lz4_acceleration = 1;  // 1 = LZ4_compress_default; larger is faster and compresses less
};

struct EncodeStats {
  int64_t chunks_in = 0;     // input chunk updates
  int64_t chunks_out = 0;    // chunk records in the batch (inputs with something shipped)
  int64_t elements_in = 0;   // input values
  int64_t elements_out = 0;  // values shipped (the rest went to the residual whole)
  int64_t parameters = 0;    // sum of num_elements over the input chunks
  int64_t body_bytes = 0;    // body before LZ4
  int64_t batch_bytes = 0;   // whole batch as it goes on the wire
  int64_t dense_chunks = 0;  // chunk records per index encoding
  int64_t bitmap_chunks = 0;
  int64_t varint_chunks = 0;
  int64_t rice_chunks = 0;
};

class BatchEncoder {
 public:
  explicit BatchEncoder(EncoderOptions options = {}) : options_(options) {}

  // Encodes `chunks` as one batch with header.origin/seq/clock/codec
  // (header.chunk_count is ignored and computed) into *out, replacing its
  // contents. Chunks may come in any order; they are written sorted by key.
  // If `residuals` is not null its contents are replaced (storage reused) by
  // one update per input chunk that has a non-zero residual (value -
  // decoded, and the whole value for elements not shipped); with a null
  // `residuals` the quantisation error is dropped.
  //
  // Errors: InvalidArgument naming the chunk and field when a chunk has
  // num_elements 0, indices and values of different length, indices not
  // strictly increasing or >= num_elements, a non-finite value, or two
  // chunks share a key (outputs untouched); ResourceExhausted when the body
  // would exceed batch_format::kMaxBodyBytes (outputs unspecified). On any
  // error nothing was encoded: the caller still owns all of `chunks`.
  Result<EncodeStats> Encode(const BatchHeader& header, std::span<const SparseChunkUpdate> chunks,
                             std::vector<uint8_t>* out, std::vector<SparseChunkUpdate>* residuals);

  // The same encoding, for a batch that goes to several streams: the body
  // is prepared once into *out (SealPrepared then seals it per stream, each
  // under its own header) and stats.batch_bytes is one sealed copy. With
  // `shipped` not null its contents are replaced by what a receiver will
  // decode, chunk by chunk (the input minus the residual, over the elements
  // shipped, sorted by key): the sender keeps it (a backlog) without
  // decoding its own batch. Errors as Encode.
  // `covered` not null: the body ends with that mark (an outer step's
  // contribution; BatchHeader::marked), at most kMaxMarkedWorkers clocks.
  Result<EncodeStats> EncodePrepared(ValueCodec codec, std::span<const SparseChunkUpdate> chunks,
                                     PreparedBody* out, std::vector<SparseChunkUpdate>* residuals,
                                     std::vector<SparseChunkUpdate>* shipped,
                                     const std::vector<std::pair<Clock, int32_t>>* covered = nullptr);

 private:
  Status Validate(std::span<const SparseChunkUpdate> chunks);
  // Encodes the chunk records into body_; stats without batch_bytes.
  Result<EncodeStats> EncodeBody(ValueCodec codec, std::span<const SparseChunkUpdate> chunks,
                                 std::vector<SparseChunkUpdate>* residuals, std::vector<SparseChunkUpdate>* shipped);

  EncoderOptions options_;
  std::vector<const SparseChunkUpdate*> order_;
  std::vector<uint8_t> body_;
  std::vector<uint32_t> kept_;
  std::vector<uint32_t> kept_idx_;
  std::vector<uint8_t> codes_;
  std::vector<float> residual_;
};

struct DecodedBatch {
  BatchHeader header;
  std::vector<SparseChunkUpdate> chunks;  // sorted by key, each with >= 1 value
  // The mark, when header.marked: per worker (clock, part), each >= -1.
  std::vector<std::pair<Clock, int32_t>> covered;
  int64_t body_bytes = 0;                 // body after decompression
};

class BatchDecoder {
 public:
  explicit BatchDecoder(DecodeLimits limits = {}) : limits_(limits) {}

  // Decodes a whole batch into *out (storage reused). Errors as described
  // above; *out is unspecified on error.
  Status Decode(std::span<const uint8_t> batch, DecodedBatch* out);

  // Parses a raw (already opened) body with `header.chunk_count` records of
  // codec `header.codec`. For tools and tests that build bodies by hand.
  Status ParseBody(const BatchHeader& header, std::span<const uint8_t> body, DecodedBatch* out);

 private:
  DecodeLimits limits_;
  std::vector<uint8_t> scratch_;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_CODEC_H_
