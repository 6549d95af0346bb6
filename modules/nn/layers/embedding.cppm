// Embedding: a lookup table of num_embeddings vectors of size embedding_dim
// (torch.nn.Embedding). weight ~ N(0, 1); the padding_idx row, if any, starts at zero and
// receives no gradient.
export module infini.nn:embedding;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

// indices (*) of an integer dtype -> (*, embedding_dim).
class EmbeddingImpl : public Cloneable<EmbeddingImpl> {
 public:
  // padding_idx may be negative (counted from the end); it is stored in [0, num_embeddings).
  EmbeddingImpl(std::int64_t num_embeddings, std::int64_t embedding_dim,
                std::optional<std::int64_t> padding_idx = std::nullopt);
  void reset() override;
  void reset_parameters(Generator* generator = nullptr);
  Tensor forward(const Tensor& indices) override;

  std::int64_t num_embeddings, embedding_dim;
  std::optional<std::int64_t> padding_idx;
  Tensor weight;  // (num_embeddings, embedding_dim)

 protected:
  std::string extra_repr() const override;
};
using Embedding = ModuleHolder<EmbeddingImpl>;

}  // namespace infini::nn
