// The names of all ops infini.autograd exports, family by family. The op table test
// (tests/autograd/op_table_test.cpp) fails when one of them has no entry there.
export module infini.autograd:op_list;
import infini.std;

export namespace infini {

std::vector<std::string_view> op_names();

}  // namespace infini
