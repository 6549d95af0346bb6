// ModelPart: which pieces of a layered language model one process builds, so that a pipeline
// rank holds only its stages (Megatron's pre_process / post_process and layer range): the
// input embedding (first stage), some of the blocks by their index in the whole model, and
// the final norm with the output head (last stage). A model built from a part draws its
// initial weights as the whole model would (the same values for the same names) and names
// its blocks by their index in the whole model ("h.5.attn.c_attn.weight").
export module infini.nn:model_part;
import infini.std;
import infini.tensor;
import :module_base;

export namespace infini::nn {

struct ModelPart {
  std::vector<std::int64_t> blocks;  // indices in the whole model, ascending
  bool embed = true;                 // the token (and position) embedding
  bool head = true;                  // the final norm and the output head

  // Every piece of a model of `num_blocks` blocks.
  static ModelPart whole(std::int64_t num_blocks);
  bool is_whole(std::int64_t num_blocks) const;
  bool has_block(std::int64_t index) const;
  // Error naming `model` unless the indices ascend, each in [0, num_blocks).
  void validate(const std::string& model, std::int64_t num_blocks) const;
  std::string str() const;  // "embed, blocks 0-2, head"
  // Error naming `model` and `piece` unless the part holds what that needs: the embedding for
  // "embed", the head for "head", the whole model for anything else ("forward", ...).
  void require(const std::string& model, const std::string& piece, std::int64_t num_blocks) const;
};

// The module holding a part's blocks (blocks[i] is block part.blocks[i]): a ModuleList
// ("h.0" ...) for all of them, else a ModuleDict keyed by their indices in the whole model.
ModulePtr block_container(const std::vector<ModulePtr>& blocks, const ModelPart& part, std::int64_t num_blocks);

}  // namespace infini::nn
