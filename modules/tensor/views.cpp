// View ops: each computes a new (shape, strides, offset) over the same storage.
module;
#include <cstdint>
module infini.tensor;
import infini.std;

namespace infini {

Tensor Tensor::make_view(Shape shape, Strides strides, std::int64_t offset, ViewReplay replay) const {
  Tensor view(storage(), std::move(shape), std::move(strides), offset, dtype());
  if (needs_grad(*this)) autograd_hooks().record_view(*this, view, std::move(replay));
  return view;
}

Tensor Tensor::as_strided(Shape shape, Strides strides, std::optional<std::int64_t> storage_offset) const {
  if (shape.size() != strides.size())
    throw ShapeError("as_strided", concat("shape ", shape, " and strides ", strides, " differ in length"));
  const std::int64_t offset = storage_offset.value_or(this->storage_offset());
  check_in_storage("as_strided", storage(), shape, strides, offset, dtype());
  // Replayed relative to the base's own offset, so that it also works on a copy laid out
  // like the base at another offset (autograd's gradient buffer).
  const std::int64_t delta = offset - this->storage_offset();
  return make_view(shape, strides, offset,
                   [=](const Tensor& t) { return t.as_strided(shape, strides, t.storage_offset() + delta); });
}

std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& new_shape) {
  Strides new_strides(new_shape.size());
  if (shape.empty()) return contiguous_strides(new_shape);
  // Walk old dims from the back, grouping runs that are contiguous with each other
  // ("chunks"); each chunk must be covered exactly by a run of new dims.
  std::int64_t view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_base_stride = strides.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= shape[tensor_d];
    if (tensor_d == 0 ||
        (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor Tensor::view(Shape new_shape) const {
  new_shape = infer_size("view", new_shape, numel());
  const ViewReplay replay = [new_shape](const Tensor& t) { return t.view(new_shape); };
  if (numel() == 0) return make_view(new_shape, contiguous_strides(new_shape), storage_offset(), replay);
  auto new_strides = view_strides(shape(), strides(), new_shape);
  if (!new_strides)
    throw ShapeError("view", concat("cannot view a tensor of shape ", shape(), " and strides ", strides(), " as ",
                                    new_shape, ": the dims to merge are not contiguous (use reshape, which copies)"));
  return make_view(std::move(new_shape), std::move(*new_strides), storage_offset(), replay);
}

Tensor Tensor::reshape(Shape new_shape) const {
  new_shape = infer_size("reshape", new_shape, numel());
  const ViewReplay replay = [new_shape](const Tensor& t) { return t.view(new_shape); };
  if (numel() == 0) return make_view(new_shape, contiguous_strides(new_shape), storage_offset(), replay);
  if (auto new_strides = view_strides(shape(), strides(), new_shape))
    return make_view(std::move(new_shape), std::move(*new_strides), storage_offset(), replay);
  return contiguous().view(std::move(new_shape));
}

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim("flatten", start_dim, dim());
  end_dim = wrap_dim("flatten", end_dim, dim());
  if (start_dim > end_dim)
    throw IndexError("flatten", concat("start_dim ", start_dim, " comes after end_dim ", end_dim));
  Shape new_shape(shape().begin(), shape().begin() + start_dim);
  new_shape.push_back(std::accumulate(shape().begin() + start_dim, shape().begin() + end_dim + 1, std::int64_t{1},
                                      std::multiplies<>()));
  new_shape.insert(new_shape.end(), shape().begin() + end_dim + 1, shape().end());
  return reshape(std::move(new_shape));
}

Tensor Tensor::unflatten(std::int64_t d, Shape sizes) const {
  d = wrap_dim("unflatten", d, dim());
  if (dim() == 0) throw ShapeError("unflatten", "cannot unflatten a 0-d tensor");
  if (sizes.empty()) throw ShapeError("unflatten", "sizes must not be empty");
  sizes = infer_size("unflatten", sizes, size(d));
  Shape new_shape(shape().begin(), shape().begin() + d);
  new_shape.insert(new_shape.end(), sizes.begin(), sizes.end());
  new_shape.insert(new_shape.end(), shape().begin() + d + 1, shape().end());
  return view(std::move(new_shape));
}

Tensor Tensor::permute(const std::vector<std::int64_t>& dims) const {
  if (static_cast<std::int64_t>(dims.size()) != dim())
    throw ShapeError("permute", concat("got ", dims.size(), " dims ", dims, " for a tensor of shape ", shape()));
  Shape new_shape(dims.size());
  Strides new_strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = wrap_dim("permute", dims[i], dim());
    if (seen[d]) throw IndexError("permute", concat("dimension ", dims[i], " repeats in ", dims));
    seen[d] = true;
    new_shape[i] = shape()[d];
    new_strides[i] = strides()[d];
  }
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(),
                   [dims](const Tensor& t) { return t.permute(dims); });
}

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  if (dim() == 0) {
    wrap_dim("transpose", dim0, 0);
    wrap_dim("transpose", dim1, 0);
    return *this;
  }
  dim0 = wrap_dim("transpose", dim0, dim());
  dim1 = wrap_dim("transpose", dim1, dim());
  Shape new_shape = shape();
  Strides new_strides = strides();
  std::swap(new_shape[dim0], new_shape[dim1]);
  std::swap(new_strides[dim0], new_strides[dim1]);
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(),
                   [dim0, dim1](const Tensor& t) { return t.transpose(dim0, dim1); });
}

Tensor Tensor::t() const {
  if (dim() > 2) throw ShapeError("t", concat("expects a tensor with <= 2 dimensions, got shape ", shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t length) const {
  if (dim() == 0) throw ShapeError("narrow", "cannot narrow a 0-d tensor");
  d = wrap_dim("narrow", d, dim());
  const std::int64_t n = size(d);
  if (start < -n || start > n)
    throw IndexError("narrow", concat("start ", start, " is out of range for dimension ", d, " of size ", n));
  if (start < 0) start += n;
  if (length < 0 || start + length > n)
    throw IndexError("narrow", concat("start ", start, " + length ", length, " exceeds dimension ", d, " of size ", n));
  return slice(d, start, start + length, 1);
}

Tensor Tensor::slice(std::int64_t d, std::optional<std::int64_t> start, std::optional<std::int64_t> end,
                     std::int64_t step) const {
  if (dim() == 0) throw ShapeError("slice", "cannot slice a 0-d tensor");
  d = wrap_dim("slice", d, dim());
  if (step <= 0) throw IndexError("slice", concat("step must be positive, got ", step));
  const std::int64_t n = size(d);
  auto clamp_index = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  const std::int64_t begin = clamp_index(start.value_or(0));
  const std::int64_t stop = std::max(begin, clamp_index(end.value_or(n)));
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape[d] = (stop - begin + step - 1) / step;
  new_strides[d] *= step;
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset() + begin * stride(d),
                   [=](const Tensor& t) { return t.slice(d, begin, stop, step); });
}

Tensor Tensor::select(std::int64_t d, std::int64_t index) const {
  if (dim() == 0) throw IndexError("select", "cannot select from a 0-d tensor");
  d = wrap_dim("select", d, dim());
  const std::int64_t n = size(d);
  if (index < -n || index >= n)
    throw IndexError("select", concat("index ", index, " is out of range for dimension ", d, " of size ", n));
  if (index < 0) index += n;
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape.erase(new_shape.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset() + index * stride(d),
                   [d, index](const Tensor& t) { return t.select(d, index); });
}

Tensor Tensor::squeeze() const {
  Shape new_shape;
  Strides new_strides;
  for (std::int64_t d = 0; d < dim(); ++d) {
    if (size(d) == 1) continue;
    new_shape.push_back(size(d));
    new_strides.push_back(stride(d));
  }
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(),
                   [](const Tensor& t) { return t.squeeze(); });
}

Tensor Tensor::squeeze(std::int64_t d) const {
  d = wrap_dim("squeeze", d, dim());
  const ViewReplay replay = [d](const Tensor& t) { return t.squeeze(d); };
  if (dim() == 0 || size(d) != 1) return make_view(shape(), strides(), storage_offset(), replay);
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape.erase(new_shape.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(), replay);
}

Tensor Tensor::unsqueeze(std::int64_t d) const {
  d = wrap_dim("unsqueeze", d, dim() + 1);
  Shape new_shape = shape();
  Strides new_strides = strides();
  const std::int64_t new_stride = d >= dim() ? 1 : size(d) * stride(d);
  new_shape.insert(new_shape.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, new_stride);
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(),
                   [d](const Tensor& t) { return t.unsqueeze(d); });
}

Tensor Tensor::expand(Shape new_shape) const {
  if (new_shape.size() < shape().size())
    throw ShapeError("expand", concat("target shape ", new_shape, " has fewer dims than the tensor's ", shape()));
  const std::size_t lead = new_shape.size() - shape().size();
  Strides new_strides(new_shape.size(), 0);
  for (std::size_t i = 0; i < new_shape.size(); ++i) {
    if (i < lead) {
      if (new_shape[i] < 0)
        throw ShapeError("expand", concat("size -1 is not allowed in a new leading dim: ", new_shape));
      continue;
    }
    const std::int64_t old_size = shape()[i - lead];
    if (new_shape[i] == -1) new_shape[i] = old_size;
    if (new_shape[i] == old_size) {
      new_strides[i] = strides()[i - lead];
    } else if (old_size != 1 || new_shape[i] < 0) {
      throw ShapeError("expand", concat("cannot expand shape ", shape(), " to ", new_shape, ": size ", old_size,
                                        " at dim ", i - lead, " is neither 1 nor ", new_shape[i]));
    }
  }
  const ViewReplay replay = [new_shape](const Tensor& t) { return t.expand(new_shape); };
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(), replay);
}

Tensor Tensor::diagonal(std::int64_t offset, std::int64_t dim1, std::int64_t dim2) const {
  if (dim() < 2) throw ShapeError("diagonal", concat("expects a tensor with >= 2 dims, got shape ", shape()));
  dim1 = wrap_dim("diagonal", dim1, dim());
  dim2 = wrap_dim("diagonal", dim2, dim());
  if (dim1 == dim2) throw IndexError("diagonal", concat("dim1 and dim2 are both ", dim1));
  std::int64_t length = offset >= 0 ? std::min(size(dim1), size(dim2) - offset) : std::min(size(dim1) + offset, size(dim2));
  length = std::max<std::int64_t>(length, 0);
  std::int64_t new_offset = storage_offset();
  if (length > 0) new_offset += offset >= 0 ? offset * stride(dim2) : -offset * stride(dim1);
  Shape new_shape;
  Strides new_strides;
  for (std::int64_t d = 0; d < dim(); ++d) {
    if (d == dim1 || d == dim2) continue;
    new_shape.push_back(size(d));
    new_strides.push_back(stride(d));
  }
  new_shape.push_back(length);
  new_strides.push_back(stride(dim1) + stride(dim2));
  return make_view(std::move(new_shape), std::move(new_strides), new_offset,
                   [=](const Tensor& t) { return t.diagonal(offset, dim1, dim2); });
}

std::vector<Tensor> Tensor::split(std::int64_t split_size, std::int64_t d) const {
  if (dim() == 0) throw ShapeError("split", "cannot split a 0-d tensor");
  d = wrap_dim("split", d, dim());
  const std::int64_t n = size(d);
  if (split_size < 0 || (split_size == 0 && n != 0))
    throw ShapeError("split", concat("split_size ", split_size, " is invalid for dimension ", d, " of size ", n));
  if (n == 0) return {*this};
  std::vector<Tensor> parts;
  for (std::int64_t start = 0; start < n; start += split_size) parts.push_back(narrow(d, start, std::min(split_size, n - start)));
  return parts;
}

std::vector<Tensor> Tensor::split(const std::vector<std::int64_t>& split_sizes, std::int64_t d) const {
  if (dim() == 0) throw ShapeError("split", "cannot split a 0-d tensor");
  d = wrap_dim("split", d, dim());
  std::int64_t total = 0;
  for (std::int64_t s : split_sizes) {
    if (s < 0) throw ShapeError("split", concat("negative size in split_sizes ", split_sizes));
    total += s;
  }
  if (total != size(d))
    throw ShapeError("split", concat("split_sizes ", split_sizes, " sum to ", total, " but dimension ", d, " has size ",
                                     size(d)));
  std::vector<Tensor> parts;
  std::int64_t start = 0;
  for (std::int64_t s : split_sizes) {
    parts.push_back(narrow(d, start, s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> Tensor::chunk(std::int64_t chunks, std::int64_t d) const {
  if (chunks <= 0) throw ShapeError("chunk", concat("number of chunks must be positive, got ", chunks));
  if (dim() == 0) throw ShapeError("chunk", "cannot chunk a 0-d tensor");
  d = wrap_dim("chunk", d, dim());
  const std::int64_t split_size = (size(d) + chunks - 1) / chunks;
  if (split_size == 0) {  // empty dim: `chunks` empty pieces, like PyTorch
    return std::vector<Tensor>(static_cast<std::size_t>(chunks), narrow(d, 0, 0));
  }
  return split(split_size, d);
}

Tensor Tensor::unfold(std::int64_t d, std::int64_t window, std::int64_t step) const {
  d = wrap_dim("unfold", d, dim());
  const std::int64_t n = dim() == 0 ? 1 : size(d);
  if (window < 0 || window > n)
    throw ShapeError("unfold", concat("window size ", window, " exceeds dimension ", d, " of size ", n));
  if (step <= 0) throw ShapeError("unfold", concat("step must be positive, got ", step));
  Shape new_shape = shape();
  Strides new_strides = strides();
  const std::int64_t base_stride = dim() == 0 ? 1 : stride(d);
  if (dim() > 0) {
    new_shape[d] = (n - window) / step + 1;
    new_strides[d] *= step;
  }
  new_shape.push_back(window);
  new_strides.push_back(base_stride);
  return make_view(std::move(new_shape), std::move(new_strides), storage_offset(),
                   [=](const Tensor& t) { return t.unfold(d, window, step); });
}

}  // namespace infini
