// The model file of a client-defined model: what a shard of a site whose
// workers bring the model (topology workload "client") must know before it
// can open its store, kept next to the store in the shard's data directory.
//
// The first worker's schema fixes the model (datacenter/shard_host.h); the
// site process writes this file, durably, into the store's directory once
// the store exists and before the shard's first commit, and a restarted
// shard reads it first, so it comes back with the same model and initial
// values without waiting for a worker. (A crash between the two leaves a
// store without values and without the file: the site then waits for a
// schema again, and the store's fingerprint check makes sure it is the
// same model.) The initial values are kept
// because a site that loses a peer's disk subtracts them (they are nobody's
// contribution; see docs/wan_replication.md).
//
// Layout (docs/on_disk_format.md, "The model file"); integers little-endian:
//   "GEOPSMDL"  8-byte magic
//   u32  version (kModelFileVersion)
//   i64  chunk_bytes
//   u32  tables; per table: u32 name length, name, i64 rows, i64 cols,
//        u64 init checksum (geops::ValuesChecksum)
//   u64  chunks; per chunk: u32 table, u32 chunk, u32 elements, f32 values
//   u32  CRC-32 (zlib) of every byte before it
//
// Pure functions over files; thread-compatible (one writer per directory).
#ifndef GEOPS_STORAGE_CLIENT_MODEL_FILE_H_
#define GEOPS_STORAGE_CLIENT_MODEL_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/model_spec.h"
#include "common/status.h"

namespace geops::storage {

inline constexpr char kModelFileName[] = "MODEL";
inline constexpr uint32_t kModelFileVersion = 1;

// Writes `spec` (a client-defined model with the initial values of this
// shard's chunks attached) to <dir>/MODEL: a temporary file, fsynced, then
// renamed over, and the directory fsynced, so a crash leaves either no file
// or the whole one. Creates `dir` when needed. Unavailable naming the path
// on an I/O error; InvalidArgument when `spec` is not client-defined.
Status WriteClientModel(const std::string& dir, const ModelSpec& spec);

// The model in <dir>/MODEL, nullopt when there is none. DataLoss naming the
// file and the problem when it is truncated, damaged (checksum) or not a
// model; FailedPrecondition for another version.
Result<std::optional<ModelSpec>> ReadClientModel(const std::string& dir);

}  // namespace geops::storage

#endif  // GEOPS_STORAGE_CLIENT_MODEL_FILE_H_
