#include "worker/fashion_mnist.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace geops::worker {
namespace {

// Largest item count a header may claim; far above Fashion-MNIST's 60000,
// and small enough that n * 784 fits in an int batch.
constexpr uint32_t kMaxIdxItems = 1u << 21;
constexpr size_t kReadChunk = 1 << 20;

std::string Quote(const std::string& path) { return "'" + path + "'"; }

// An open gzip stream; closes on destruction.
class GzFile {
 public:
  GzFile(gzFile f, std::string path) : f_(f), path_(std::move(path)) {}
  GzFile(GzFile&& o) noexcept : f_(std::exchange(o.f_, nullptr)), path_(std::move(o.path_)) {}
  GzFile& operator=(GzFile&&) = delete;
  ~GzFile() {
    if (f_ != nullptr) gzclose_r(f_);
  }

  const std::string& path() const { return path_; }

  // Reads up to n bytes; returns how many (fewer at end of stream) or
  // DataLoss when the compressed stream is corrupt.
  Result<size_t> Read(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned want = static_cast<unsigned>(std::min(n - got, kReadChunk));
      const int r = gzread(f_, out + got, want);
      if (r < 0) {
        int code = Z_OK;
        const char* msg = gzerror(f_, &code);
        return DataLossError(Quote(path_) + " is not a valid gzip stream: " +
                             (msg != nullptr ? msg : "read error"));
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }

  // Reads exactly n bytes of `what`; DataLoss naming expected vs read bytes.
  Status ReadExact(uint8_t* out, size_t n, const std::string& what) {
    GEOPS_ASSIGN_OR_RETURN(size_t got, Read(out, n));
    if (got != n) return Truncated(what, n, got);
    return Status::Ok();
  }

  Status Truncated(const std::string& what, uint64_t expected, uint64_t got) const {
    return DataLossError(Quote(path_) + " is truncated: expected " + std::to_string(expected) +
                         " bytes of " + what + ", read " + std::to_string(got));
  }

  // DataLoss when anything follows the expected content.
  Status ExpectEnd(const std::string& after) {
    uint8_t extra[1];
    GEOPS_ASSIGN_OR_RETURN(size_t got, Read(extra, 1));
    if (got != 0) return DataLossError(Quote(path_) + " has trailing data after " + after);
    return Status::Ok();
  }

 private:
  gzFile f_;
  std::string path_;
};

Result<GzFile> OpenGz(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return NotFoundError("Fashion-MNIST file " + Quote(path) +
                           " does not exist; install the Debian package dataset-fashion-mnist");
    }
    return FailedPreconditionError("cannot open " + Quote(path) + ": " + std::strerror(err));
  }
  gzFile f = gzdopen(fd, "rb");
  if (f == nullptr) {
    ::close(fd);
    return ResourceExhaustedError("cannot allocate a gzip reader for " + Quote(path));
  }
  GzFile file(f, path);
  gzbuffer(f, 256 * 1024);
  // zlib reads a non-gzip file transparently; the IDX files are always compressed.
  if (gzdirect(f) == 1) {
    return DataLossError(Quote(path) + " is not a gzip file (expected a .gz IDX file)");
  }
  return file;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads the header and checks the magic; returns the item count.
Result<uint32_t> ReadIdxHeader(GzFile& file, uint32_t magic, uint8_t* header, size_t header_bytes) {
  GEOPS_RETURN_IF_ERROR(file.ReadExact(header, header_bytes, "IDX header"));
  const uint32_t got = BigEndian32(header);
  if (got != magic) {
    return DataLossError(Quote(file.path()) + " has IDX magic " + std::to_string(got) +
                         "; expected " + std::to_string(magic) +
                         (magic == kIdxImagesMagic ? " (images)" : " (labels)"));
  }
  const uint32_t count = BigEndian32(header + 4);
  if (count == 0 || count > kMaxIdxItems) {
    return DataLossError(Quote(file.path()) + " claims " + std::to_string(count) +
                         " items; expected between 1 and " + std::to_string(kMaxIdxItems));
  }
  return count;
}

// Which examples a reader keeps: i with i % of == worker (every one for
// {0, 1}). The whole file is read and checked either way.
struct Share {
  int worker = 0;
  int of = 1;
  bool Keeps(uint64_t i) const { return i % static_cast<uint64_t>(of) == static_cast<uint64_t>(worker); }
  uint64_t KeptOf(uint64_t count) const {
    return count > static_cast<uint64_t>(worker) ? (count - worker + of - 1) / of : 0;
  }
};

// Reads every image of the file and converts the share's to floats; *count
// is the file's image count.
Status ReadImages(const std::string& path, Share share, Dataset* out, uint32_t* count) {
  GEOPS_ASSIGN_OR_RETURN(GzFile file, OpenGz(path));
  uint8_t header[16];
  GEOPS_ASSIGN_OR_RETURN(*count, ReadIdxHeader(file, kIdxImagesMagic, header, 16));
  const uint32_t rows = BigEndian32(header + 8);
  const uint32_t cols = BigEndian32(header + 12);
  if (rows != kFashionMnistRows || cols != kFashionMnistCols) {
    return DataLossError(Quote(path) + " holds " + std::to_string(rows) + "x" +
                         std::to_string(cols) + " images; expected " +
                         std::to_string(kFashionMnistRows) + "x" +
                         std::to_string(kFashionMnistCols));
  }
  const size_t dims = rows * cols;
  const uint64_t expected = uint64_t{*count} * dims;
  // Grow with the data actually present, not with what the header claims.
  out->x.clear();
  out->x.reserve(std::min<uint64_t>(share.KeptOf(*count), share.KeptOf(70000)) * dims);
  // Whole images per read, so that each is kept or skipped in one piece.
  const size_t per_read = kReadChunk / dims * dims;
  std::vector<uint8_t> buf(per_read);
  uint64_t read = 0;
  while (read < expected) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(per_read, expected - read));
    GEOPS_ASSIGN_OR_RETURN(size_t got, file.Read(buf.data(), want));
    const uint64_t first = read / dims;
    for (size_t at = 0; at + dims <= got; at += dims) {
      if (!share.Keeps(first + at / dims)) continue;
      const size_t base = out->x.size();
      out->x.resize(base + dims);
      float* dst = out->x.data() + base;
      for (size_t i = 0; i < dims; ++i) dst[i] = static_cast<float>(buf[at + i]) * (1.0f / 255.0f);
    }
    read += got;
    if (got < want) return file.Truncated("pixel data", expected, read);
  }
  GEOPS_RETURN_IF_ERROR(file.ExpectEnd(std::to_string(*count) + " images"));
  out->n = static_cast<int64_t>(out->x.size() / dims);
  out->dims = static_cast<int>(dims);
  return Status::Ok();
}

// Reads and checks every label of the file and keeps the share's; *count
// is the file's label count.
Status ReadLabels(const std::string& path, Share share, Dataset* out, uint32_t* count) {
  GEOPS_ASSIGN_OR_RETURN(GzFile file, OpenGz(path));
  uint8_t header[8];
  GEOPS_ASSIGN_OR_RETURN(*count, ReadIdxHeader(file, kIdxLabelsMagic, header, 8));
  std::vector<uint8_t> bytes(*count);
  GEOPS_ASSIGN_OR_RETURN(size_t got, file.Read(bytes.data(), *count));
  if (got != *count) return file.Truncated("labels", *count, got);
  GEOPS_RETURN_IF_ERROR(file.ExpectEnd(std::to_string(*count) + " labels"));
  out->y.clear();
  out->y.reserve(share.KeptOf(*count));
  for (uint32_t i = 0; i < *count; ++i) {
    if (bytes[i] >= kFashionMnistClasses) {
      return DataLossError(Quote(path) + " has label " + std::to_string(bytes[i]) + " at index " +
                           std::to_string(i) + "; labels must be in [0, " +
                           std::to_string(kFashionMnistClasses) + ")");
    }
    if (share.Keeps(i)) out->y.push_back(bytes[i]);
  }
  return Status::Ok();
}

// *count: the files' example count.
Result<Dataset> ReadFiles(const std::string& images_path, const std::string& labels_path, Share share,
                          uint32_t* count) {
  Dataset data;
  data.num_classes = kFashionMnistClasses;
  uint32_t labels = 0, images = 0;
  GEOPS_RETURN_IF_ERROR(ReadLabels(labels_path, share, &data, &labels));
  GEOPS_RETURN_IF_ERROR(ReadImages(images_path, share, &data, &images));
  if (images != labels) {
    return DataLossError(Quote(images_path) + " has " + std::to_string(images) + " images but " +
                         Quote(labels_path) + " has " + std::to_string(labels) + " labels");
  }
  *count = images;
  return data;
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

std::string_view Prefix(FashionMnistSplit split) {
  return split == FashionMnistSplit::kTrain ? "train" : "t10k";
}

}  // namespace

std::string FashionMnistImagesPath(std::string_view dir, FashionMnistSplit split) {
  return JoinPath(dir, std::string(Prefix(split)) + "-images-idx3-ubyte.gz");
}

std::string FashionMnistLabelsPath(std::string_view dir, FashionMnistSplit split) {
  return JoinPath(dir, std::string(Prefix(split)) + "-labels-idx1-ubyte.gz");
}

Result<Dataset> ReadFashionMnistFiles(const std::string& images_path,
                                      const std::string& labels_path) {
  uint32_t count = 0;
  return ReadFiles(images_path, labels_path, Share{}, &count);
}

Result<Dataset> ReadFashionMnistShare(const std::string& images_path, const std::string& labels_path,
                                      int worker, int num_workers) {
  // Bad worker numbers are refused before 30 MB are read; whether the share
  // is empty needs the files' count, so that check follows the read.
  GEOPS_RETURN_IF_ERROR(CheckShare(std::numeric_limits<int64_t>::max(), worker, num_workers));
  uint32_t count = 0;
  GEOPS_ASSIGN_OR_RETURN(Dataset data, ReadFiles(images_path, labels_path, Share{worker, num_workers}, &count));
  GEOPS_RETURN_IF_ERROR(CheckShare(count, worker, num_workers));
  return data;
}

Result<Dataset> LoadFashionMnist(std::string_view dir, FashionMnistSplit split) {
  return ReadFashionMnistFiles(FashionMnistImagesPath(dir, split),
                               FashionMnistLabelsPath(dir, split));
}

Result<Dataset> LoadFashionMnistShare(std::string_view dir, FashionMnistSplit split, int worker,
                                      int num_workers) {
  return ReadFashionMnistShare(FashionMnistImagesPath(dir, split), FashionMnistLabelsPath(dir, split),
                               worker, num_workers);
}

}  // namespace geops::worker
