// The envelope of a WAN batch: the 48-byte header (magic, version, value
// codec, origin site, sequence number, clock, chunk count, body sizes,
// CRC-32C) around a body that is stored raw or as one LZ4 block. The body's
// contents (chunk records) are the business of codec.h; this layer only
// seals and opens it. Layout: docs/wan_batch_format.md, wan/codec/batch_format.h.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WAN_CODEC_BATCH_ENVELOPE_H_
#define GEOPS_WAN_CODEC_BATCH_ENVELOPE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "wan/codec/batch_format.h"

namespace geops::wan {

struct BatchHeader {
  SiteId origin = 0;  // site that produced the batch
  uint64_t seq = 0;   // per (origin, destination) stream; receivers apply each once
  Clock clock = 0;    // origin shard clock the batch was cut at
  ValueCodec codec = ValueCodec::kFp32;
  uint32_t chunk_count = 0;  // chunk records in the body
  // The origin's last batch on this stream: its workers have finished and
  // it sends nothing after this one (the outer step of avg and diloco
  // leaves the origin out of later steps).
  bool final = false;
  // The body ends with a mark (batch_format::kFlagMarked): an outer step's
  // contribution names the clocks through which it holds each worker's
  // updates (DecodedBatch::covered).
  bool marked = false;
};

// Bounds a receiver enforces before allocating anything.
struct DecodeLimits {
  int64_t max_batch_bytes = int64_t{512} << 20;           // whole batch as received
  uint32_t max_body_bytes = batch_format::kMaxBodyBytes;  // body after decompression
  uint32_t max_chunk_elements = uint32_t{1} << 26;        // num_elements of one chunk
};

// Writes header + body (LZ4-compressed when `compress` and LZ4 makes it
// smaller; `lz4_acceleration` 1 = LZ4_compress_default) into *out,
// replacing its contents. Returns ResourceExhausted when the body exceeds
// kMaxBodyBytes, InvalidArgument for an unknown codec.
Status SealBatch(const BatchHeader& header, std::span<const uint8_t> body, bool compress,
                 int lz4_acceleration, std::vector<uint8_t>* out);

// A body made ready once (compressed when LZ4 makes it smaller) to be
// sealed under several headers: a batch that goes to several streams is
// encoded and compressed once, and each stream's copy gets a header written
// for it (its own seq) by SealPrepared; nothing sealed is ever rewritten.
struct PreparedBody {
  ValueCodec codec = ValueCodec::kFp32;
  uint32_t chunk_count = 0;  // chunk records in the body
  uint32_t raw_size = 0;     // body before LZ4
  bool lz4 = false;          // `stored` is one LZ4 block
  bool marked = false;       // the body ends with a mark (BatchHeader::marked)
  std::vector<uint8_t> stored;
};

// Prepares `body` (chunk_count records of `codec`) into *out, replacing its
// contents. Errors as SealBatch.
Status PrepareBody(ValueCodec codec, uint32_t chunk_count, std::span<const uint8_t> body, bool compress,
                   int lz4_acceleration, PreparedBody* out);

// Writes the whole batch, header then body, into *out (contents replaced):
// header.origin, seq, clock and final as given; the codec, chunk count and
// mark flag are the body's (header.codec, chunk_count and marked are
// ignored).
void SealPrepared(const BatchHeader& header, const PreparedBody& body, std::vector<uint8_t>* out);

// Reads and checks the header only (magic, version, codec, flags, reserved,
// sizes against the input length and `limits`, chunk count against the
// smallest record size); no checksum. Errors:
// InvalidArgument for a malformed or unsupported header, DataLoss when the
// input is shorter or longer than the header says, ResourceExhausted when a
// size exceeds `limits`.
Result<BatchHeader> PeekBatchHeader(std::span<const uint8_t> batch,
                                    const DecodeLimits& limits = {});

// PeekBatchHeader, then verifies the checksum and points *body at the raw
// body: inside `batch` when stored uncompressed, else inside *scratch (into
// which it is decompressed; contents replaced, capacity reused). Additional
// errors: DataLoss on a checksum mismatch, an LZ4 failure or a decompressed
// size that differs from the header's. Outputs are unspecified on error.
Status OpenBatch(std::span<const uint8_t> batch, const DecodeLimits& limits, BatchHeader* header,
                 std::vector<uint8_t>* scratch, std::span<const uint8_t>* body);

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_BATCH_ENVELOPE_H_
