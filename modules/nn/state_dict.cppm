// StateDict: the saved state of anything that has one (a module's parameters and buffers,
// an optimizer, an LR scheduler, a grad scaler, a data loader's position, an RNG), as a
// map from dotted names to tensors, sorted by name. Scalars are 0-d tensors (float64 for
// real numbers, int64 for counts), lists are 1-d tensors, so every state saves to
// safetensors as it is.
export module infini.nn:state_dict;
import infini.std;
export import infini.autograd;

export namespace infini {

using StateDict = std::map<std::string, Tensor>;

}  // namespace infini
