// Value codecs of the WAN batch format (fp32, fp16, int8 and int4 with a
// per-chunk scale, 1-bit sign with a per-chunk scale) with error feedback.
//
// Quantize*() take the m candidate values of one chunk and decide, per
// value, its code and whether it is shipped at all. A value is shipped only
// when its decoded value d is non-zero (int8/int4 q = 0, fp16 underflow and, for
// the sign codec, |v| < scale / 2, where +-scale would be worse than 0, are
// kept back) and a residual r with d + r == v exactly in float exists. For
// every candidate j the residual is written to residual[j]: v - d when
// shipped, v itself when kept back. So (decoded + residual) reproduces every
// input bit for bit, and the caller adds the residuals back into its
// accumulator (error feedback) without losing any mass.
//
// Decode*() are the exact inverse used by the receiver and by the encoder to
// compute d, so both sides agree bit for bit.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WAN_CODEC_QUANTIZE_H_
#define GEOPS_WAN_CODEC_QUANTIZE_H_

#include <cstdint>

namespace geops::wan {

// IEEE binary16 conversions, round to nearest even. Values beyond +-65504
// become +-Inf; NaN stays NaN.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// Output of quantising one chunk's candidates. kept[0, shipped) are the
// positions (0..m-1) of the shipped candidates, in input order.
struct QuantizeOutput {
  uint32_t shipped = 0;
  float scale = 0.0f;  // int8, int4 and sign codecs; 0 when nothing is shipped
};

// REQUIRES for all: v[0, m) finite; kept, codes and residual hold m entries
// (sign: codes holds (m + 7) / 8 bytes, bit j LSB-first, 1 = negative;
// int4: codes holds m bytes of scratch, and on return its first
// (shipped + 1) / 2 bytes are the packed codes: shipped value s in the low
// nibble of byte s / 2 when s is even, the high nibble when odd, an unused
// last high nibble 0).
QuantizeOutput QuantizeFp32(const float* v, uint32_t m, uint32_t* kept, float* codes,
                            float* residual);
QuantizeOutput QuantizeFp16(const float* v, uint32_t m, uint32_t* kept, uint16_t* codes,
                            float* residual);
QuantizeOutput QuantizeInt8(const float* v, uint32_t m, uint32_t* kept, int8_t* codes,
                            float* residual);
QuantizeOutput QuantizeInt4(const float* v, uint32_t m, uint32_t* kept, uint8_t* codes,
                            float* residual);
QuantizeOutput QuantizeSign(const float* v, uint32_t m, uint32_t* kept, uint8_t* codes,
                            float* residual);

// Decoders: write n values to out. Return the index of the first code that
// is invalid (fp16 Inf/NaN, int8 -128, int4 -8) or decodes to a non-finite
// value, or -1 when all are good. DecodeInt4 reads (n + 1) / 2 bytes and
// does not look at an unused last high nibble (the caller checks it).
int64_t DecodeFp32(const uint8_t* codes, uint32_t n, float* out);
int64_t DecodeFp16(const uint8_t* codes, uint32_t n, float* out);
int64_t DecodeInt8(const uint8_t* codes, uint32_t n, float scale, float* out);
int64_t DecodeInt4(const uint8_t* codes, uint32_t n, float scale, float* out);
int64_t DecodeSign(const uint8_t* codes, uint32_t n, float scale, float* out);

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_QUANTIZE_H_
