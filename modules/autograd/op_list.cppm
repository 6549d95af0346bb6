// The names of all ops infini.autograd exports, family by family. The op table test
// (tests/autograd/op_table_test.cpp) fails when one of them has no entry there.
module;
#include <string_view>
#include <vector>
export module infini.autograd:op_list;

export namespace infini {

std::vector<std::string_view> op_names();

}  // namespace infini
