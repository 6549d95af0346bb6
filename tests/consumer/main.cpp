// A downstream program: finds the installed package, imports the module and checks values.
#include <cstdio>
import infini.tensor;

int main() {
  const infini::Tensor a = infini::arange(6, {.dtype = infini::kFloat64}).view({2, 3});
  const infini::Tensor column = a.t().select(0, 1);  // a[:, 1] = [1, 4]
  const double sum = column.contiguous().data_ptr<double>()[0] + column.contiguous().data_ptr<double>()[1];
  std::printf("%s\nsum of a[:, 1] = %g\n", a.str().c_str(), sum);
  return sum == 5.0 ? 0 : 1;
}
