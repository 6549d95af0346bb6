// Errors raised inside a layer's forward name the layer: an op's error is raised again,
// with the same type, as "<Layer>: <op>: <message>". Internal to the layers' .cpp files.
export module infini.nn:layer_errors;
import infini.std;
import infini.autograd;

export namespace infini::nn {

template <class F>
auto with_layer_name(const std::string& layer, F&& compute) {
  try {
    return std::forward<F>(compute)();
  } catch (const Error& e) {
    if (e.op() == layer) throw;  // the layer's own check
    if (dynamic_cast<const ShapeError*>(&e)) throw ShapeError(layer, e.what());
    if (dynamic_cast<const DTypeError*>(&e)) throw DTypeError(layer, e.what());
    if (dynamic_cast<const IndexError*>(&e)) throw IndexError(layer, e.what());
    if (dynamic_cast<const DeviceError*>(&e)) throw DeviceError(layer, e.what());
    if (dynamic_cast<const OutOfMemoryError*>(&e)) throw OutOfMemoryError(layer, e.what());
    if (dynamic_cast<const IOError*>(&e)) throw IOError(layer, e.what());
    throw Error(layer, e.what());
  }
}

}  // namespace infini::nn
