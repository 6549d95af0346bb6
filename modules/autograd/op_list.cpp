module infini.autograd;
import infini.std;

namespace infini {

std::vector<std::string_view> op_names() {
  std::vector<std::string_view> names;
  auto add_family = [&names](const auto& family) { names.insert(names.end(), family.begin(), family.end()); };
  add_family(kElementwiseOps);
  add_family(kReductionOps);
  add_family(kShapeOps);
  add_family(kNNFunctionalOps);
  add_family(kAttentionOps);
  add_family(kIndexingOps);
  add_family(kLinalgOps);
  add_family(kConvOps);
  return names;
}

}  // namespace infini
