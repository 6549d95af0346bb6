// The parameters of an llm.c checkpoint: after the header, every tensor's values one after
// another in the layout's order, all float32 (version 3) or all bfloat16 (version 5).
module;
#include <cstddef>
#include <cstdint>
#include <cstring>
module infini.nn;
import infini.std;

namespace infini::llmc::detail {
namespace {

constexpr std::int32_t kFloat32Version = 3;
constexpr std::int32_t kBFloat16Version = 5;

std::string names_of(const TensorLayout& layout) {
  std::string names;
  for (const auto& [name, shape] : layout) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

DataType checkpoint_dtype(std::int32_t version, const FileError& source) {
  if (version == kFloat32Version) return kFloat32;
  if (version == kBFloat16Version) return kBFloat16;
  source.fail("unknown version ", version, ", expected ", kFloat32Version, " (float32 parameters) or ",
              kBFloat16Version, " (bfloat16 parameters)");
}

std::int32_t checkpoint_version(std::string_view op, DataType dtype) {
  if (dtype == kFloat32) return kFloat32Version;
  if (dtype == kBFloat16) return kBFloat16Version;
  throw DTypeError(op, concat("llm.c checkpoints store float32 (version 3) or bfloat16 (version 5) parameters, got ",
                              dtype));
}

std::uint64_t payload_bytes(const TensorLayout& layout, std::size_t itemsize, const FileError& source) {
  std::int64_t total = 0;
  for (const auto& [name, shape] : layout) {
    std::int64_t bytes = static_cast<std::int64_t>(itemsize);
    for (const std::int64_t dim : shape)
      if (__builtin_mul_overflow(bytes, dim, &bytes))
        source.fail("tensor '", name, "' of shape ", shape, " needs more than 2^63 - 1 bytes");
    if (__builtin_add_overflow(total, bytes, &total))
      source.fail("the parameters need more than 2^63 - 1 bytes (at tensor '", name, "')");
  }
  return static_cast<std::uint64_t>(total);
}

std::vector<std::pair<std::string, Tensor>> read_tensors(std::span<const std::byte> payload, const TensorLayout& layout,
                                                         DataType dtype, const FileError& source) {
  const std::size_t itemsize = infini::itemsize(dtype);
  const std::uint64_t expected = payload_bytes(layout, itemsize, source);
  if (payload.size() != expected)
    source.fail("the header's dims need ", kHeaderBytes + expected, " bytes (", kHeaderBytes, "-byte header + ",
                expected / itemsize, " ", dtype, " parameters), the file has ", kHeaderBytes + payload.size(),
                payload.size() < expected ? " (truncated?)" : " (bytes after the last tensor)");
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(layout.size());
  std::size_t offset = 0;
  for (const auto& [name, shape] : layout) {
    Tensor stored = empty(shape, {.dtype = dtype});
    const auto nbytes = static_cast<std::size_t>(stored.nbytes());
    if (nbytes != 0) std::memcpy(stored.data_ptr(), payload.data() + offset, nbytes);
    offset += nbytes;
    tensors.emplace_back(name, stored.to(kFloat32));
  }
  return tensors;
}

void check_tensors(std::string_view op, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const TensorLayout& layout) {
  if (tensors.size() != layout.size())
    throw Error(op, concat("expected ", layout.size(), " tensors (", names_of(layout), "), got ", tensors.size()));
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    const auto& [expected_name, expected_shape] = layout[i];
    if (name != expected_name)
      throw Error(op, concat("tensor ", i, " is named '", name, "', expected '", expected_name, "' (the order is ",
                             names_of(layout), ")"));
    if (!tensor.defined()) throw Error(op, concat("tensor '", name, "' is undefined"));
    if (!is_floating_point(tensor.dtype()))
      throw DTypeError(op, concat("tensor '", name, "' is ", tensor.dtype(), ", expected a floating-point dtype"));
    if (tensor.shape() != expected_shape)
      throw ShapeError(op, concat("tensor '", name, "' has shape ", tensor.shape(), ", the config needs ",
                                  expected_shape));
  }
}

void write_tensors(io::FileSink& out, const std::vector<std::pair<std::string, Tensor>>& tensors, DataType dtype) {
  for (const auto& [name, tensor] : tensors) {
    const Tensor stored = tensor.to(Device::cpu(), dtype).contiguous();
    out.write(std::span(static_cast<const std::byte*>(stored.data_ptr()), static_cast<std::size_t>(stored.nbytes())));
  }
}

void write_checkpoint(const std::filesystem::path& path, Header header, const TensorLayout& layout,
                      const std::vector<std::pair<std::string, Tensor>>& tensors, DataType dtype, const FileError& source) {
  header[1] = checkpoint_version(source.op, dtype);
  payload_bytes(layout, infini::itemsize(dtype), source);
  check_tensors(source.op, tensors, layout);
  io::write_file_atomically(path, [&](io::FileSink& out) {
    write_header(out, header);
    write_tensors(out, tensors, dtype);
  });
}

}  // namespace infini::llmc::detail
