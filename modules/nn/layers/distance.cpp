// CosineSimilarity and PairwiseDistance (see distance.cppm): option checks and the ops.
module;
#include <cstdint>
module infini.nn;

namespace infini::nn {

CosineSimilarityImpl::CosineSimilarityImpl(std::int64_t dim, double eps)
    : Cloneable("CosineSimilarity"), dim(dim), eps(eps) {
  reset();
}

void CosineSimilarityImpl::reset() {
  if (!(eps >= 0)) throw Error(type_name(), concat("eps must be >= 0, got ", eps));
}

Tensor CosineSimilarityImpl::forward(const Tensor& x1, const Tensor& x2) {
  return with_layer_name(type_name(), [&] { return cosine_similarity(x1, x2, dim, eps); });
}

Tensor CosineSimilarityImpl::operator()(const Tensor& x1, const Tensor& x2) {
  return call({x1, x2}, [&] { return forward(x1, x2); });
}

Tensor PairwiseDistanceImpl::forward(const Tensor& x1, const Tensor& x2) {
  return with_layer_name(type_name(), [&] { return pairwise_distance(x1, x2, p, eps, keepdim); });
}

Tensor PairwiseDistanceImpl::operator()(const Tensor& x1, const Tensor& x2) {
  return call({x1, x2}, [&] { return forward(x1, x2); });
}

}  // namespace infini::nn
