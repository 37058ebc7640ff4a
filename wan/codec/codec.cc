#include "wan/codec/codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/float_kernels.h"
#include "wan/codec/byte_io.h"
#include "wan/codec/quantize.h"
#include "wan/codec/sparse_index.h"

namespace geops::wan {
namespace bf = batch_format;
namespace {

std::string ChunkName(size_t pos, ChunkKey key) {
  return "chunk " + std::to_string(pos) + " (table " + std::to_string(key.table) + ", chunk " +
         std::to_string(key.chunk) + ")";
}

// Reads one varint field of chunk record `pos`, or says which field broke.
Status GetField(const uint8_t** p, const uint8_t* end, size_t pos, const char* field,
                uint32_t* v) {
  VarintResult r = ReadVarint(p, end, v);
  if (r == VarintResult::kOk) [[likely]]
    return Status::Ok();
  return InvalidArgumentError("batch body: chunk " + std::to_string(pos) + " record field " +
                              field + " " + VarintProblem(r));
}

}  // namespace

Status BatchEncoder::Validate(std::span<const SparseChunkUpdate> chunks) {
  order_.clear();
  bool sorted = true;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SparseChunkUpdate& u = chunks[c];
    if (u.num_elements == 0) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": num_elements is 0");
    }
    if (u.indices.size() != u.values.size()) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": " + std::to_string(u.indices.size()) +
                                  " indices but " + std::to_string(u.values.size()) + " values");
    }
    if (u.indices.size() > u.num_elements) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": " + std::to_string(u.indices.size()) +
                                  " values exceed num_elements " + std::to_string(u.num_elements));
    }
    for (size_t i = 0; i < u.indices.size(); ++i) {
      if (u.indices[i] >= u.num_elements || (i > 0 && u.indices[i] <= u.indices[i - 1])) {
        return InvalidArgumentError(ChunkName(c, u.key) + ": index " + std::to_string(i) + " (" +
                                    std::to_string(u.indices[i]) +
                                    ") is out of order or >= num_elements " +
                                    std::to_string(u.num_elements));
      }
    }
    int64_t bad = FirstNonFinite(u.values.data(), static_cast<int64_t>(u.values.size()));
    if (bad >= 0) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": value " + std::to_string(bad) +
                                  " is not finite");
    }
    if (c > 0 && !(chunks[c - 1].key < u.key)) sorted = false;
    order_.push_back(&u);
  }
  if (!sorted) {
    std::sort(
        order_.begin(), order_.end(),
        [](const SparseChunkUpdate* a, const SparseChunkUpdate* b) { return a->key < b->key; });
    for (size_t c = 1; c < order_.size(); ++c) {
      if (order_[c - 1]->key == order_[c]->key) {
        return InvalidArgumentError(ChunkName(c, order_[c]->key) + ": key appears twice");
      }
    }
  }
  return Status::Ok();
}

namespace {

void DecodeCodes(ValueCodec codec, const uint8_t* codes, uint32_t n, float scale, float* out) {
  switch (codec) {
    case ValueCodec::kFp32:
      DecodeFp32(codes, n, out);
      break;
    case ValueCodec::kFp16:
      DecodeFp16(codes, n, out);
      break;
    case ValueCodec::kInt8:
      DecodeInt8(codes, n, scale, out);
      break;
    case ValueCodec::kSign:
      DecodeSign(codes, n, scale, out);
      break;
    case ValueCodec::kInt4:
      DecodeInt4(codes, n, scale, out);
      break;
  }
}

}  // namespace

Result<EncodeStats> BatchEncoder::Encode(const BatchHeader& header,
                                         std::span<const SparseChunkUpdate> chunks,
                                         std::vector<uint8_t>* out,
                                         std::vector<SparseChunkUpdate>* residuals) {
  GEOPS_ASSIGN_OR_RETURN(EncodeStats stats, EncodeBody(header.codec, chunks, residuals, nullptr));
  BatchHeader h = header;
  h.chunk_count = static_cast<uint32_t>(stats.chunks_out);
  GEOPS_RETURN_IF_ERROR(SealBatch(h, body_, options_.compress, options_.lz4_acceleration, out));
  stats.batch_bytes = static_cast<int64_t>(out->size());
  return stats;
}

Result<EncodeStats> BatchEncoder::EncodePrepared(ValueCodec codec, std::span<const SparseChunkUpdate> chunks,
                                                 PreparedBody* out, std::vector<SparseChunkUpdate>* residuals,
                                                 std::vector<SparseChunkUpdate>* shipped,
                                                 const std::vector<std::pair<Clock, int32_t>>* covered) {
  if (covered != nullptr && covered->size() > batch_format::kMaxMarkedWorkers) {
    return InvalidArgumentError("a mark of " + std::to_string(covered->size()) + " workers; at most " +
                                std::to_string(batch_format::kMaxMarkedWorkers));
  }
  GEOPS_ASSIGN_OR_RETURN(EncodeStats stats, EncodeBody(codec, chunks, residuals, shipped));
  if (covered != nullptr) {
    const uint32_t n = static_cast<uint32_t>(covered->size());
    const size_t at = body_.size();
    constexpr size_t kEntry = sizeof(int64_t) + sizeof(int32_t);
    body_.resize(at + sizeof(uint32_t) + n * kEntry);
    uint8_t* p = body_.data() + at;
    std::memcpy(p, &n, sizeof(n));
    p += sizeof(n);
    for (const auto& [clock, part] : *covered) {
      const int64_t c = clock;
      const int32_t q = part;
      std::memcpy(p, &c, sizeof(c));
      std::memcpy(p + sizeof(c), &q, sizeof(q));
      p += kEntry;
    }
  }
  GEOPS_RETURN_IF_ERROR(PrepareBody(codec, static_cast<uint32_t>(stats.chunks_out), body_, options_.compress,
                                    options_.lz4_acceleration, out));
  out->marked = covered != nullptr;
  stats.batch_bytes = static_cast<int64_t>(batch_format::kHeaderSize + out->stored.size());
  return stats;
}

Result<EncodeStats> BatchEncoder::EncodeBody(ValueCodec codec, std::span<const SparseChunkUpdate> chunks,
                                             std::vector<SparseChunkUpdate>* residuals,
                                             std::vector<SparseChunkUpdate>* shipped) {
  if (static_cast<uint8_t>(codec) >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " + std::to_string(static_cast<int>(codec)));
  }
  GEOPS_RETURN_IF_ERROR(Validate(chunks));
  EncodeStats stats;
  size_t res_used = 0;
  size_t shipped_used = 0;
  uint64_t estimate = 0;
  for (const SparseChunkUpdate* u : order_) {
    estimate += bf::kMaxChunkHeadSize + bf::kScaleSize + 9 * uint64_t{u->indices.size()};
  }
  body_.clear();
  body_.reserve(std::min<uint64_t>(estimate, bf::kMaxBodyBytes));
  ByteWriter w(&body_);
  uint32_t chunks_out = 0;
  ChunkKey prev_key;
  for (const SparseChunkUpdate* u : order_) {
    const uint32_t m = static_cast<uint32_t>(u->values.size());
    ++stats.chunks_in;
    stats.elements_in += m;
    stats.parameters += u->num_elements;
    if (kept_.size() < m) {
      kept_.resize(m);
      kept_idx_.resize(m);
      residual_.resize(m);
      codes_.resize(size_t{m} * 4);
    }
    QuantizeOutput q;
    const float* v = u->values.data();
    switch (codec) {
      case ValueCodec::kFp32:
        q = QuantizeFp32(v, m, kept_.data(), reinterpret_cast<float*>(codes_.data()),
                         residual_.data());
        break;
      case ValueCodec::kFp16:
        q = QuantizeFp16(v, m, kept_.data(), reinterpret_cast<uint16_t*>(codes_.data()),
                         residual_.data());
        break;
      case ValueCodec::kInt8:
        q = QuantizeInt8(v, m, kept_.data(), reinterpret_cast<int8_t*>(codes_.data()),
                         residual_.data());
        break;
      case ValueCodec::kSign:
        q = QuantizeSign(v, m, kept_.data(), codes_.data(), residual_.data());
        break;
      case ValueCodec::kInt4:
        q = QuantizeInt4(v, m, kept_.data(), codes_.data(), residual_.data());
        break;
    }
    if (residuals != nullptr) {
      uint32_t nonzero = 0;
      for (uint32_t j = 0; j < m; ++j) nonzero += residual_[j] != 0.0f;
      if (nonzero > 0) {
        if (res_used == residuals->size()) residuals->emplace_back();
        SparseChunkUpdate& r = (*residuals)[res_used++];
        r.key = u->key;
        r.num_elements = u->num_elements;
        r.indices.resize(nonzero);
        r.values.resize(nonzero);
        uint32_t k = 0;
        for (uint32_t j = 0; j < m; ++j) {
          r.indices[k] = u->indices[j];
          r.values[k] = residual_[j];
          k += residual_[j] != 0.0f;
          if (k == nonzero) break;
        }
      }
    }
    if (q.shipped == 0) continue;
    std::span<const uint32_t> idx(u->indices.data(), m);
    if (q.shipped < m) {
      for (uint32_t s = 0; s < q.shipped; ++s) kept_idx_[s] = u->indices[kept_[s]];
      idx = std::span<const uint32_t>(kept_idx_.data(), q.shipped);
    }
    if (shipped != nullptr) {
      // What the receiver decodes.
      if (shipped_used == shipped->size()) shipped->emplace_back();
      SparseChunkUpdate& d = (*shipped)[shipped_used++];
      d.key = u->key;
      d.num_elements = u->num_elements;
      d.indices.assign(idx.begin(), idx.end());
      d.values.resize(q.shipped);
      // The receiver's own decoding of these codes, bit for bit (the sign
      // of a zero included).
      DecodeCodes(codec, codes_.data(), q.shipped, q.scale, d.values.data());
    }
    const IndexPlan plan = ChooseIndexEncoding(idx, u->num_elements);
    const uint64_t value_bytes = bf::ValueBytes(codec, q.shipped);
    // Same table: the chunk id as a step from the previous record's (>= 1
    // as keys are sorted), which is one byte for neighbouring chunks.
    const bool same_table = chunks_out > 0 && u->key.table == prev_key.table;
    const uint32_t chunk_field = same_table ? u->key.chunk - prev_key.chunk : u->key.chunk;
    const uint32_t index_bytes = static_cast<uint32_t>(plan.bytes);
    const uint64_t head = VarintBytes(u->key.table) + VarintBytes(chunk_field) +
                          VarintBytes(u->num_elements) + VarintBytes(q.shipped) + 1 +
                          VarintBytes(index_bytes);
    const uint64_t record =
        head + (bf::HasScale(codec) ? bf::kScaleSize : 0) + plan.bytes + value_bytes;
    if (body_.size() + record > bf::kMaxBodyBytes) {
      return ResourceExhaustedError("batch body would exceed " + std::to_string(bf::kMaxBodyBytes) +
                                    " bytes at " + ChunkName(chunks_out, u->key) +
                                    "; split the batch");
    }
    uint8_t* p = w.Extend(record);
    p = PutVarint(p, u->key.table);
    p = PutVarint(p, chunk_field);
    p = PutVarint(p, u->num_elements);
    p = PutVarint(p, q.shipped);
    *p++ = static_cast<uint8_t>(plan.encoding);
    p = PutVarint(p, index_bytes);
    if (bf::HasScale(codec)) {
      std::memcpy(p, &q.scale, bf::kScaleSize);
      p += bf::kScaleSize;
    }
    EncodeIndex(plan, idx, u->num_elements, p);
    std::memcpy(p + plan.bytes, codes_.data(), value_bytes);
    prev_key = u->key;
    ++chunks_out;
    stats.elements_out += q.shipped;
    switch (plan.encoding) {
      case IndexEncoding::kDense:
        ++stats.dense_chunks;
        break;
      case IndexEncoding::kBitmap:
        ++stats.bitmap_chunks;
        break;
      case IndexEncoding::kDeltaVarint:
        ++stats.varint_chunks;
        break;
      case IndexEncoding::kRice:
        ++stats.rice_chunks;
        break;
    }
  }
  stats.chunks_out = chunks_out;
  stats.body_bytes = static_cast<int64_t>(body_.size());
  if (residuals != nullptr) residuals->resize(res_used);
  if (shipped != nullptr) shipped->resize(shipped_used);
  return stats;
}

Status BatchDecoder::Decode(std::span<const uint8_t> batch, DecodedBatch* out) {
  BatchHeader header;
  std::span<const uint8_t> body;
  GEOPS_RETURN_IF_ERROR(OpenBatch(batch, limits_, &header, &scratch_, &body));
  return ParseBody(header, body, out);
}

Status BatchDecoder::ParseBody(const BatchHeader& header, std::span<const uint8_t> body,
                               DecodedBatch* out) {
  const ValueCodec codec = header.codec;
  if (static_cast<uint8_t>(codec) >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " +
                                std::to_string(static_cast<int>(codec)));
  }
  // Before anything is sized by the count: every record takes at least
  // MinChunkRecordSize bytes.
  if (uint64_t{header.chunk_count} * bf::MinChunkRecordSize(codec) > body.size()) {
    return InvalidArgumentError("batch header: chunk count " + std::to_string(header.chunk_count) +
                                " cannot fit in a body of " + std::to_string(body.size()) +
                                " bytes");
  }
  out->header = header;
  out->body_bytes = static_cast<int64_t>(body.size());
  out->chunks.resize(header.chunk_count);
  const uint8_t* p = body.data();
  const uint8_t* const end = p + body.size();
  for (uint32_t c = 0; c < header.chunk_count; ++c) {
    SparseChunkUpdate& u = out->chunks[c];
    uint32_t chunk_field = 0;
    GEOPS_RETURN_IF_ERROR(GetField(&p, end, c, "table", &u.key.table));
    GEOPS_RETURN_IF_ERROR(GetField(&p, end, c, "chunk delta", &chunk_field));
    // The chunk id is a step from the previous record's when the table is
    // the same; a step of 0 or a table going backwards breaks the order.
    if (c > 0 && u.key.table == out->chunks[c - 1].key.table) {
      const uint32_t prev = out->chunks[c - 1].key.chunk;
      if (chunk_field == 0 || chunk_field > UINT32_MAX - prev) {
        return InvalidArgumentError(
            "batch body: chunk " + std::to_string(c) + " (table " + std::to_string(u.key.table) +
            "): chunk delta " + std::to_string(chunk_field) + " after chunk " +
            std::to_string(prev) +
            (chunk_field == 0 ? ": key not after the previous chunk's (repeated)"
                              : ": chunk id overflows 32 bits"));
      }
      u.key.chunk = prev + chunk_field;
    } else {
      u.key.chunk = chunk_field;
    }
    // Built only for an error: a batch carries hundreds of chunks.
    const auto name = [&] { return ChunkName(c, u.key); };
    if (c > 0 && !(out->chunks[c - 1].key < u.key)) {
      return InvalidArgumentError(name() +
                                  ": key not after the previous chunk's (unsorted or repeated)");
    }
    uint32_t count = 0;
    uint32_t index_bytes = 0;
    GEOPS_RETURN_IF_ERROR(GetField(&p, end, c, "num_elements", &u.num_elements));
    GEOPS_RETURN_IF_ERROR(GetField(&p, end, c, "count", &count));
    if (p == end) {
      return InvalidArgumentError(name() + ": record truncated in its index encoding");
    }
    const uint8_t enc = *p++;
    GEOPS_RETURN_IF_ERROR(GetField(&p, end, c, "index_bytes", &index_bytes));
    if (u.num_elements == 0 || u.num_elements > limits_.max_chunk_elements) {
      return InvalidArgumentError(name() + ": num_elements " + std::to_string(u.num_elements) +
                                  " outside [1, " + std::to_string(limits_.max_chunk_elements) +
                                  "]");
    }
    if (count == 0 || count > u.num_elements) {
      return InvalidArgumentError(name() + ": value count " + std::to_string(count) +
                                  " outside [1, num_elements " + std::to_string(u.num_elements) +
                                  "]");
    }
    if (enc >= kNumIndexEncodings) {
      return InvalidArgumentError(name() + ": unknown index encoding " + std::to_string(enc));
    }
    float scale = 0.0f;
    if (bf::HasScale(codec)) {
      if (static_cast<size_t>(end - p) < bf::kScaleSize) {
        return InvalidArgumentError(name() + ": record truncated in scale");
      }
      std::memcpy(&scale, p, bf::kScaleSize);
      p += bf::kScaleSize;
      if (!(scale > 0.0f) || !std::isfinite(scale)) {
        return InvalidArgumentError(name() + ": scale " + std::to_string(scale) +
                                    " is not a positive finite number");
      }
    }
    if (index_bytes > static_cast<size_t>(end - p)) {
      return InvalidArgumentError(name() + ": index_bytes " + std::to_string(index_bytes) +
                                  " runs past the body end");
    }
    const std::span<const uint8_t> index_in(p, index_bytes);
    p += index_bytes;
    const uint64_t value_bytes = bf::ValueBytes(codec, count);
    if (value_bytes > static_cast<uint64_t>(end - p)) {
      return InvalidArgumentError(name() + ": " + std::to_string(count) + " values (" +
                                  std::to_string(value_bytes) + " bytes) run past the body end");
    }
    const uint8_t* values_in = p;
    p += value_bytes;
    u.indices.resize(count);
    u.values.resize(count);
    Status s = DecodeIndex(static_cast<IndexEncoding>(enc), index_in, u.num_elements, u.indices);
    if (!s.ok()) return s.WithContext(name());
    int64_t bad = -1;
    switch (codec) {
      case ValueCodec::kFp32:
        bad = DecodeFp32(values_in, count, u.values.data());
        break;
      case ValueCodec::kFp16:
        bad = DecodeFp16(values_in, count, u.values.data());
        break;
      case ValueCodec::kInt8:
        bad = DecodeInt8(values_in, count, scale, u.values.data());
        break;
      case ValueCodec::kSign:
        if (count % 8 != 0 && (values_in[value_bytes - 1] >> (count % 8)) != 0) {
          return InvalidArgumentError(name() + ": sign bits set beyond the value count");
        }
        bad = DecodeSign(values_in, count, scale, u.values.data());
        break;
      case ValueCodec::kInt4:
        if (count % 2 != 0 && (values_in[value_bytes - 1] >> 4) != 0) {
          return InvalidArgumentError(name() + ": int4 high nibble set beyond the value count");
        }
        bad = DecodeInt4(values_in, count, scale, u.values.data());
        break;
    }
    if (bad >= 0) {
      return InvalidArgumentError(name() + ": value " + std::to_string(bad) +
                                  " is not a finite number (or an invalid code)");
    }
  }
  out->covered.clear();
  if (header.marked) {
    uint32_t n = 0;
    if (end - p < static_cast<std::ptrdiff_t>(sizeof(n))) {
      return InvalidArgumentError("batch body: the mark is truncated");
    }
    std::memcpy(&n, p, sizeof(n));
    p += sizeof(n);
    constexpr size_t kEntry = sizeof(int64_t) + sizeof(int32_t);
    if (n > bf::kMaxMarkedWorkers || end - p != static_cast<std::ptrdiff_t>(size_t{n} * kEntry)) {
      return InvalidArgumentError("batch body: a mark of " + std::to_string(n) + " workers in " +
                                  std::to_string(end - p) + " bytes");
    }
    out->covered.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      int64_t c = 0;
      int32_t q = 0;
      std::memcpy(&c, p, sizeof(c));
      std::memcpy(&q, p + sizeof(c), sizeof(q));
      p += kEntry;
      if (c < -1 || q < -1) {
        return InvalidArgumentError("batch body: the mark names clock " + std::to_string(c) + " part " +
                                    std::to_string(q));
      }
      out->covered[i] = {c, q};
    }
  }
  if (p != end) {
    return InvalidArgumentError("batch body: " + std::to_string(end - p) +
                                " trailing bytes after " + std::to_string(header.chunk_count) +
                                " chunks");
  }
  return Status::Ok();
}

}  // namespace geops::wan
