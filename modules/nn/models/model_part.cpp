module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {

ModelPart ModelPart::whole(std::int64_t num_blocks) {
  ModelPart part;
  for (std::int64_t l = 0; l < num_blocks; ++l) part.blocks.push_back(l);
  return part;
}

bool ModelPart::is_whole(std::int64_t num_blocks) const {
  return embed && head && static_cast<std::int64_t>(blocks.size()) == num_blocks;
}

bool ModelPart::has_block(std::int64_t index) const { return std::binary_search(blocks.begin(), blocks.end(), index); }

void ModelPart::validate(const std::string& model, std::int64_t num_blocks) const {
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i] < 0 || blocks[i] >= num_blocks || (i > 0 && blocks[i] <= blocks[i - 1]))
      throw Error(model, concat("a model part's blocks must be ascending indices in [0, ", num_blocks, "), got ",
                                blocks));
}

std::string ModelPart::str() const {
  std::string text = embed ? "embed" : "";
  // Runs of consecutive indices as first-last.
  for (std::size_t i = 0; i < blocks.size();) {
    std::size_t j = i;
    while (j + 1 < blocks.size() && blocks[j + 1] == blocks[j] + 1) ++j;
    text += concat(text.empty() ? "" : ", ", i == 0 ? "blocks " : "", blocks[i]);
    if (j > i) text += concat("-", blocks[j]);
    i = j + 1;
  }
  if (head) text += text.empty() ? "head" : ", head";
  return text.empty() ? "nothing" : text;
}

void ModelPart::require(const std::string& model, const std::string& piece, std::int64_t num_blocks) const {
  const bool whole = piece != "embed" && piece != "head";
  if (!(whole ? is_whole(num_blocks) : piece == "embed" ? embed : head))
    throw Error(model + "." + piece, concat("needs ", whole ? "the whole model" : "the " + piece,
                                            "; this one was built with a part of it (", str(), ") of ", num_blocks,
                                            " blocks: run its pieces through a pipeline"));
}

ModulePtr block_container(const std::vector<ModulePtr>& blocks, const ModelPart& part, std::int64_t num_blocks) {
  if (static_cast<std::int64_t>(part.blocks.size()) == num_blocks) {
    auto list = std::make_shared<ModuleListImpl>();
    for (const ModulePtr& block : blocks) list->push_back(block);
    return list;
  }
  auto dict = std::make_shared<ModuleDictImpl>();
  for (std::size_t i = 0; i < blocks.size(); ++i) dict->insert(std::to_string(part.blocks[i]), blocks[i]);
  return dict;
}

}  // namespace infini::nn
