// einsum (torch.einsum): the equation is parsed into one list of labels per operand (the
// dims an ellipsis covers get labels of their own, right-aligned across operands), repeated
// labels within an operand become diagonals, then the operands are contracted left to
// right, each pair through one bmm: (batch, left-only, contracted) @ (batch, contracted,
// right-only). A label is summed out as soon as no later operand nor the output has it.
// Every step is a differentiable view, sum, expand, reshape or bmm, so gradients of any
// order follow.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

constexpr std::string_view kOp = "einsum";
// Labels: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (so an implicit output lists uppercase first,
// like PyTorch); dim j of the broadcast ellipsis is kLetters + j.
constexpr int kLetters = 52;

using Labels = std::vector<int>;

bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
int letter_label(char c) { return c <= 'Z' ? c - 'A' : c - 'a' + 26; }

std::string label_name(int label) {
  if (label >= kLetters) return concat("dim ", label - kLetters, " of the ellipsis");
  return concat("subscript '", static_cast<char>(label < 26 ? 'A' + label : 'a' + label - 26), "'");
}

// One term of the equation: its letters in order, and where "..." stood among them.
struct Term {
  Labels letters;
  std::optional<std::size_t> ellipsis;
};

struct Equation {
  std::vector<Term> inputs;
  std::optional<Term> output;  // after "->"; implicit when absent
};

Equation parse(std::string_view equation) {
  Equation e;
  Term term;
  bool in_output = false;
  for (std::size_t i = 0; i < equation.size(); ++i) {
    const char c = equation[i];
    if (c == ' ') continue;
    if (is_letter(c)) {
      term.letters.push_back(letter_label(c));
    } else if (c == '.') {
      if (equation.substr(i, 3) != "...")
        throw Error(kOp, concat("'.' at index ", i, " of \"", equation, "\" is not part of an ellipsis \"...\""));
      if (term.ellipsis)
        throw Error(kOp, concat("a second ellipsis at index ", i, " of \"", equation, "\" (one per term)"));
      term.ellipsis = term.letters.size();
      i += 2;
    } else if (c == ',' && !in_output) {
      e.inputs.push_back(term);
      term = {};
    } else if (c == '-' && !in_output && equation.substr(i, 2) == "->") {
      e.inputs.push_back(term);
      term = {};
      in_output = true;
      ++i;
    } else {
      throw Error(kOp, concat("unexpected '", c, "' at index ", i, " of \"", equation,
                              "\" (subscripts are letters a-z and A-Z, terms are separated by ',', "
                              "the output follows one \"->\")"));
    }
  }
  if (in_output) e.output = term;
  else e.inputs.push_back(term);
  return e;
}

// An operand with one label per dim.
struct Part {
  Tensor t;
  Labels labels;
};

// The operands as parts: checked against their terms, ellipsis dims labelled (E = the most
// dims any ellipsis covers; an ellipsis of e dims gets the last e of the E labels), and
// repeated labels turned into diagonals.
std::vector<Part> label_operands(const std::vector<Term>& terms, const TensorList& operands, int& ellipsis_dims) {
  std::vector<std::int64_t> covered(operands.size(), 0);
  ellipsis_dims = 0;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const auto letters = static_cast<std::int64_t>(terms[k].letters.size());
    const std::int64_t dims = operands[k].dim();
    if (terms[k].ellipsis ? dims < letters : dims != letters)
      throw ShapeError(
          kOp, concat("operand ", k, " of shape ", operands[k].shape(), " has ", dims, " dims but its term has ",
                      letters, " subscripts", terms[k].ellipsis ? " and an ellipsis" : " and no ellipsis"));
    covered[k] = dims - letters;
    ellipsis_dims = std::max(ellipsis_dims, static_cast<int>(covered[k]));
  }
  std::vector<Part> parts;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const Term& term = terms[k];
    Part part{operands[k], {}};
    const std::size_t at = term.ellipsis.value_or(term.letters.size());
    part.labels.assign(term.letters.begin(), term.letters.begin() + static_cast<std::ptrdiff_t>(at));
    for (std::int64_t j = 0; j < covered[k]; ++j)
      part.labels.push_back(kLetters + ellipsis_dims - static_cast<int>(covered[k]) + static_cast<int>(j));
    part.labels.insert(part.labels.end(), term.letters.begin() + static_cast<std::ptrdiff_t>(at), term.letters.end());
    // A label at dims i < j: their diagonal, which takes the last dim.
    for (bool repeated = true; repeated;) {
      repeated = false;
      for (std::size_t i = 0; i < part.labels.size() && !repeated; ++i)
        for (std::size_t j = i + 1; j < part.labels.size() && !repeated; ++j) {
          if (part.labels[i] != part.labels[j]) continue;
          const auto di = static_cast<std::int64_t>(i), dj = static_cast<std::int64_t>(j);
          if (part.t.shape()[i] != part.t.shape()[j])
            throw ShapeError(
                kOp, concat(label_name(part.labels[i]), " is repeated in operand ", k, " of shape ", part.t.shape(),
                            " with different sizes ", part.t.shape()[i], " and ", part.t.shape()[j]));
          const int label = part.labels[i];
          part.t = part.t.diagonal(0, di, dj);
          part.labels.erase(part.labels.begin() + dj);
          part.labels.erase(part.labels.begin() + di);
          part.labels.push_back(label);
          repeated = true;
        }
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

// Every label's size must agree across operands, where it is not 1 (size 1 broadcasts).
void check_sizes(const std::vector<Part>& parts, int ellipsis_dims) {
  std::vector<std::int64_t> size(static_cast<std::size_t>(kLetters + ellipsis_dims), -1);
  std::vector<std::size_t> seen_in(size.size(), 0);
  for (std::size_t k = 0; k < parts.size(); ++k)
    for (std::size_t d = 0; d < parts[k].labels.size(); ++d) {
      const auto label = static_cast<std::size_t>(parts[k].labels[d]);
      const std::int64_t s = parts[k].t.shape()[d];
      if (size[label] == -1 || size[label] == 1) {
        size[label] = s;
        seen_in[label] = k;
      } else if (s != 1 && s != size[label]) {
        throw ShapeError(kOp, concat(label_name(parts[k].labels[d]), " has size ", s, " in operand ", k, " but ",
                                     size[label], " in operand ", seen_in[label], " (sizes must match or be 1)"));
      }
    }
}

// The output's labels: the explicit term (ellipsis dims where "..." stands), or else the
// ellipsis dims followed by the letters used exactly once, in label order.
Labels output_labels(const Equation& e, int ellipsis_dims) {
  std::vector<int> uses(kLetters, 0);
  for (const Term& term : e.inputs)
    for (int label : term.letters) ++uses[static_cast<std::size_t>(label)];
  Labels ellipsis;
  for (int j = 0; j < ellipsis_dims; ++j) ellipsis.push_back(kLetters + j);
  if (!e.output) {
    Labels out = ellipsis;
    for (int label = 0; label < kLetters; ++label)
      if (uses[static_cast<std::size_t>(label)] == 1) out.push_back(label);
    return out;
  }
  const Term& term = *e.output;
  for (std::size_t i = 0; i < term.letters.size(); ++i) {
    const int label = term.letters[i];
    if (uses[static_cast<std::size_t>(label)] == 0)
      throw Error(kOp, concat("output ", label_name(label), " does not appear in any input term"));
    if (std::count(term.letters.begin(), term.letters.end(), label) > 1)
      throw Error(kOp, concat("output ", label_name(label), " appears more than once in the output"));
  }
  Labels out = term.letters;
  if (term.ellipsis)
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(*term.ellipsis), ellipsis.begin(), ellipsis.end());
  return out;
}

bool has(const Labels& labels, int label) { return std::find(labels.begin(), labels.end(), label) != labels.end(); }

std::int64_t position(const Labels& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) - labels.begin();
}

// part with the labels that satisfy `drop` summed out.
template <class Drop>
Part sum_out(const Part& part, Drop drop) {
  std::vector<std::int64_t> dims;
  Labels kept;
  for (std::size_t d = 0; d < part.labels.size(); ++d) {
    if (drop(part.labels[d])) dims.push_back(static_cast<std::int64_t>(d));
    else kept.push_back(part.labels[d]);
  }
  if (dims.empty()) return part;
  return {sum(part.t, dims), kept};
}

// left and right combined over their shared labels: those in `keep` stay (a batch of
// products), the others are contracted. One bmm of (batch, left-only, contracted) @
// (batch, contracted, right-only); shared dims of size 1 are expanded to the other's size.
Part contract(const Part& left, const Part& right, const Labels& keep) {
  Labels batch, summed, left_only, right_only;
  for (int label : left.labels) {
    if (!has(right.labels, label)) left_only.push_back(label);
    else if (has(keep, label)) batch.push_back(label);
    else summed.push_back(label);
  }
  for (int label : right.labels)
    if (!has(left.labels, label)) right_only.push_back(label);
  auto size_of = [&](int label) {
    const bool in_left = has(left.labels, label), in_right = has(right.labels, label);
    const std::int64_t ls = in_left ? left.t.shape()[position(left.labels, label)] : 1;
    const std::int64_t rs = in_right ? right.t.shape()[position(right.labels, label)] : 1;
    return in_left && ls != 1 ? ls : rs;
  };
  // Part p permuted to `order`, shared dims expanded, as (count(groups[0]), count(groups[1]), ...).
  auto arrange = [&](const Part& p, const std::vector<const Labels*>& groups) {
    std::vector<std::int64_t> order;
    Shape expanded, grouped;
    for (const Labels* group : groups) {
      std::int64_t n = 1;
      for (int label : *group) {
        order.push_back(position(p.labels, label));
        expanded.push_back(size_of(label));
        n *= size_of(label);
      }
      grouped.push_back(n);
    }
    return p.t.permute(order).expand(expanded).reshape(grouped);
  };
  const Tensor a = arrange(left, {&batch, &left_only, &summed});
  const Tensor b = arrange(right, {&batch, &summed, &right_only});
  Shape shape;
  Labels labels;
  for (const Labels* group : {&batch, &left_only, &right_only})
    for (int label : *group) {
      shape.push_back(size_of(label));
      labels.push_back(label);
    }
  return {bmm(a, b).reshape(shape), labels};
}

void check_operands(const TensorList& operands) {
  if (operands.empty()) throw Error(kOp, "expected at least one operand");
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const Tensor& t = operands[k];
    if (!t.defined()) throw Error(kOp, concat("operand ", k, " is undefined"));
    if (t.device() != operands[0].device())
      throw DeviceError(kOp,
                        concat("expected all operands on one device, got ", operands[0].device(), " and ", t.device()));
    if (t.dtype() != operands[0].dtype())
      throw DTypeError(kOp, concat("expected operands of one dtype, got ", operands[0].dtype(), " and ", t.dtype()));
  }
  if (!is_floating_point(operands[0].dtype()))
    throw DTypeError(
        kOp, concat("operands of dtype ", operands[0].dtype(), " are not supported (expected a floating-point dtype)"));
}

}  // namespace

Tensor einsum(std::string_view equation, const TensorList& operands) {
  const Equation e = parse(equation);
  if (e.inputs.size() != operands.size())
    throw Error(kOp, concat("the equation \"", equation, "\" has ", e.inputs.size(), " input terms but ",
                            operands.size(), " operands were given"));
  check_operands(operands);
  int ellipsis_dims = 0;
  std::vector<Part> parts = label_operands(e.inputs, operands, ellipsis_dims);
  check_sizes(parts, ellipsis_dims);
  const Labels out = output_labels(e, ellipsis_dims);

  // needed[k]: the labels of the output and of the operands after k.
  std::vector<Labels> needed(parts.size(), out);
  for (std::size_t k = parts.size() - 1; k > 0; --k) {
    needed[k - 1] = needed[k];
    needed[k - 1].insert(needed[k - 1].end(), parts[k].labels.begin(), parts[k].labels.end());
  }
  Part acc = sum_out(parts[0], [&](int label) { return !has(needed[0], label); });
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const Labels& keep = needed[k];
    const Part right = sum_out(parts[k], [&](int label) { return !has(keep, label) && !has(acc.labels, label); });
    acc = sum_out(acc, [&](int label) { return !has(keep, label) && !has(right.labels, label); });
    acc = contract(acc, right, keep);
  }
  std::vector<std::int64_t> order;
  for (int label : out) order.push_back(position(acc.labels, label));
  return acc.t.permute(order);
}

}  // namespace infini
