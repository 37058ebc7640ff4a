// Reader for Fashion-MNIST in its original gzip-compressed IDX files.
//
// The Debian package dataset-fashion-mnist installs them under
// kFashionMnistDir: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz
// (60000 examples), t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz
// (10000). An IDX file is a big-endian header (magic 2051 for images with
// count, rows and cols; magic 2049 for labels with count) followed by one
// unsigned byte per pixel or label. Images become rows of 784 floats in
// [0, 1]; labels become int32 in [0, 10).
//
// Every check fails loudly and names the file: a missing file is NotFound
// (install dataset-fashion-mnist); a file that is not gzip, has a bad magic,
// wrong image size, truncated or trailing data, a label out of range, or an
// image/label count mismatch is DataLoss. Memory grows with the data actually
// read, never with the count a header claims.
//
// Thread-safety: stateless functions; call from any thread.
#ifndef GEOPS_WORKER_FASHION_MNIST_H_
#define GEOPS_WORKER_FASHION_MNIST_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "worker/dataset.h"

namespace geops::worker {

inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistRows = 28;
inline constexpr int kFashionMnistCols = 28;
inline constexpr int kFashionMnistClasses = 10;
inline constexpr uint32_t kIdxImagesMagic = 2051;
inline constexpr uint32_t kIdxLabelsMagic = 2049;

enum class FashionMnistSplit {
  kTrain,  // 60000 examples, "train-" files
  kTest,   // 10000 examples, "t10k-" files
};

// The image and label file paths of `split` under `dir`.
std::string FashionMnistImagesPath(std::string_view dir, FashionMnistSplit split);
std::string FashionMnistLabelsPath(std::string_view dir, FashionMnistSplit split);

// Loads one split from `dir` (normally kFashionMnistDir). Errors as above.
Result<Dataset> LoadFashionMnist(std::string_view dir, FashionMnistSplit split);

// Loads a pair of gzip IDX files of 28x28 images and their labels.
Result<Dataset> ReadFashionMnistFiles(const std::string& images_path,
                                      const std::string& labels_path);

// Worker `worker` of `num_workers`' share of one split, or of a pair of
// files: exactly PartitionDataset(LoadFashionMnist(...), worker,
// num_workers), but only the share's images become floats (a fifth of the
// memory and conversion for five workers). The whole files are read and
// checked as above; the share's own errors are PartitionDataset's.
Result<Dataset> LoadFashionMnistShare(std::string_view dir, FashionMnistSplit split, int worker,
                                      int num_workers);
Result<Dataset> ReadFashionMnistShare(const std::string& images_path, const std::string& labels_path,
                                      int worker, int num_workers);

}  // namespace geops::worker

#endif  // GEOPS_WORKER_FASHION_MNIST_H_
