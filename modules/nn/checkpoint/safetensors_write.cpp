// Writing safetensors: the JSON header as the reference implementation formats it (compact,
// "__metadata__" first, then one entry per tensor with keys dtype, shape, data_offsets,
// padded with spaces to a multiple of 8 bytes), then each tensor's bytes, in name order.
module;
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include "json_text.h"
module infini.nn;
import infini.std;

namespace infini::io {
namespace {

using infini::detail::json_text;

constexpr std::string_view kOp = "save_safetensors";

// `text` as a JSON string literal (quotes, backslashes and control characters escaped, other
// UTF-8 as is); IOError when it is not valid UTF-8, which JSON text must be.
std::string json_string(const std::string& text, std::string_view what) {
  try {
    return json_text(nlohmann::json(text));
  } catch (const nlohmann::json::type_error&) {
    throw IOError(kOp, concat(what, " ", detail::quote(text), " is not valid UTF-8 (the safetensors header is JSON)"));
  }
}

// {"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},...}
// (no "__metadata__" when `metadata` is empty), padded with spaces to a multiple of 8 bytes
// so that the byte buffer starts 8-byte aligned.
std::string make_header(const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (header.back() != '{') header += ',';
      header += json_string(key, "metadata key") + ":" + json_string(value, "the value of metadata key " + detail::quote(key));
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw Error(kOp, concat("tensor ", detail::quote(name), " is undefined"));
    if (name == "__metadata__")
      throw IOError(kOp, "the name '__metadata__' is reserved for the metadata and cannot name a tensor");
    if (header.size() > 1) header += ',';
    header += json_string(name, "tensor name");
    header += ":{\"dtype\":\"" + std::string(detail::dtype_name(tensor.dtype())) + "\",\"shape\":[";
    for (std::int64_t d = 0; d < tensor.dim(); ++d) header += (d ? "," : "") + std::to_string(tensor.size(d));
    const auto nbytes = static_cast<std::uint64_t>(tensor.nbytes());
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > detail::kMaxHeaderBytes)
    throw IOError(kOp, concat("the header would have ", header.size(), " bytes, more than readers accept (",
                              detail::kMaxHeaderBytes, ")"));
  return header;
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = make_header(tensors, metadata);
  std::array<std::byte, 8> length{};  // little-endian
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<std::byte>(header.size() >> (8 * i));
  try {
    write_file_atomically(path, [&](FileSink& out) {
      out.write(length);
      out.write(header);
      for (const auto& [name, tensor] : tensors) {
        // One tensor at a time in host memory: a copy only for other devices and strided views.
        const Tensor host = tensor.detach().to(Device::cpu()).contiguous();
        if (host.numel() > 0)
          out.write(std::span(static_cast<const std::byte*>(host.data_ptr()), static_cast<std::size_t>(host.nbytes())));
      }
    });
  } catch (const IOError& error) {
    throw IOError(kOp, error.what());
  }
}

}  // namespace infini::io
