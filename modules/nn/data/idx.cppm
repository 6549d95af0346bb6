// IDX files (the (Fashion-)MNIST format), plain or gzip-compressed: a big-endian header
// (magic 0x00000803 for uint8 images with 3 dims, 0x00000801 for uint8 labels with 1 dim;
// then each dim as uint32) followed by the uint8 values. The header is validated and the
// file's size (a gzip file's decompressed size) must equal what it announces before the
// values are kept: anything else raises IOError naming the file, the expected and the
// actual size.
export module infini.nn:idx;
import infini.std;
import infini.autograd;

export namespace infini::data {

// (N, rows, cols) uint8 images; rows and cols must be >= 1.
Tensor read_idx_images(const std::string& path);
// (N) int64 labels.
Tensor read_idx_labels(const std::string& path);

}  // namespace infini::data
