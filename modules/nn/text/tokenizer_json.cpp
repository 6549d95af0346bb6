// Hugging Face tokenizers' tokenizer.json, for byte-level BPE models (GPT-2, LLaMA-3, Qwen):
//   model          {"type": "BPE", "vocab": {token: id}, "merges": ["left right" | [left, right]],
//                   "ignore_merges"?}: token strings spelled with byte_characters()
//   pre_tokenizer  ByteLevel with use_regex (GPT-2's pattern), or Sequence [Split {Regex,
//                  "Isolated"}, ByteLevel without use_regex] (LLaMA-3, Qwen)
//   added_tokens   [{"id", "content", ...}]: raw text, matched before normalization and
//                  pre-tokenization
//   normalizer     null, NFC or a Sequence of NFC (Qwen)
//   decoder null or ByteLevel; post_processor only read for its BOS token.
// What else tokenizers can describe (other normalizers, other models, byte fallback, dropout,
// prefix spaces) is refused by name rather than tokenized differently.
module;
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "../checkpoint/json_text.h"
module infini.nn;
import infini.std;

namespace infini::text::detail {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const char* op, std::string where) : op_(op), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& what) const { throw IOError(op_, concat(where_, ": ", what)); }

  json parse(const std::filesystem::path& path) const {
    const std::string text = read_text_file(op_, path);
    // nlohmann's lexer takes a NUL byte for the end of the input; JSON allows NUL only escaped.
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
      fail(concat("not valid JSON (a NUL byte at byte ", nul, ")"));
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) fail("not valid JSON");
    if (!j.is_object()) fail(concat("expected a JSON object, found ", j.type_name()));
    return j;
  }

  // j[key] when present and not null.
  static const json* get(const json& j, const char* key) {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const json& j, const char* key, const std::string& where) const {
    const json* v = get(j, key);
    if (!v || !v->is_string()) fail(concat(where, ".", key, " must be a string"));
    return v->get<std::string>();
  }
  bool flag(const json& j, const char* key, bool otherwise, const std::string& where) const {
    const json* v = get(j, key);
    if (!v) return otherwise;
    if (!v->is_boolean()) fail(concat(where, ".", key, " must be true or false"));
    return v->get<bool>();
  }
  std::int64_t id(const json& v, const std::string& where) const {
    if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<std::uint64_t>() > 0x7fffffffu : v.get<std::int64_t>() < 0))
      fail(concat(where, " must be an id, an integer 0 <= id < 2^31; found ", infini::detail::json_text(v).substr(0, 40)));
    return v.get<std::int64_t>();
  }

  // The pre-tokenizer regex, or a refusal naming what is not supported.
  std::string pattern(const json& root) const {
    const json* pre = get(root, "pre_tokenizer");
    if (!pre || !pre->is_object()) fail("pre_tokenizer must be ByteLevel or a Sequence of Split and ByteLevel");
    const std::string type = string(*pre, "type", "pre_tokenizer");
    if (type == "ByteLevel") {
      byte_level(*pre, "pre_tokenizer");
      if (!flag(*pre, "use_regex", true, "pre_tokenizer")) fail("pre_tokenizer ByteLevel without use_regex splits nothing");
      return std::string(kGPT2Pattern);
    }
    const json* steps = get(*pre, "pretokenizers");
    if (type != "Sequence" || !steps || !steps->is_array() || steps->size() != 2)
      fail(concat("pre_tokenizer ", quote(type),
                  " is not supported: expected ByteLevel or a Sequence of Split and ByteLevel (GPT-2, LLaMA-3)"));
    const json& split = (*steps)[0];
    const json& bytes = (*steps)[1];
    const std::string where = "pre_tokenizer.pretokenizers";
    if (!split.is_object() || string(split, "type", where + "[0]") != "Split" || !bytes.is_object() ||
        string(bytes, "type", where + "[1]") != "ByteLevel")
      fail(concat(where, " must be [Split, ByteLevel]"));
    if (string(split, "behavior", where + "[0]") != "Isolated" || flag(split, "invert", false, where + "[0]"))
      fail(concat(where, "[0]: only the Split behavior \"Isolated\" without invert is supported"));
    const json* regex = get(split, "pattern");
    if (!regex || !regex->is_object() || !get(*regex, "Regex"))
      fail(concat(where, "[0].pattern must be {\"Regex\": ...}"));
    byte_level(bytes, where + "[1]");
    if (flag(bytes, "use_regex", true, where + "[1]")) fail(concat(where, "[1]: ByteLevel after Split must not split again (use_regex)"));
    return string(*regex, "Regex", where + "[0].pattern");
  }

  void byte_level(const json& step, const std::string& where) const {
    if (flag(step, "add_prefix_space", false, where)) fail(concat(where, ": add_prefix_space is not supported"));
  }

  void model(const json& root, BpeVocab& vocab, std::unordered_map<std::string, std::int64_t>& ids,
             std::vector<std::pair<std::string, std::string>>& merges) const {
    const json* m = get(root, "model");
    if (!m || !m->is_object()) fail("model must be an object");
    if (const json* type = get(*m, "type"); type && (!type->is_string() || *type != "BPE"))
      fail(concat("model.type ", infini::detail::json_text(*type).substr(0, 40), " is not supported: expected \"BPE\""));
    if (get(*m, "dropout")) fail("model.dropout is not supported (BPE dropout)");
    if (flag(*m, "byte_fallback", false, "model")) fail("model.byte_fallback is not supported (byte-level BPE needs none)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (const json* v = get(*m, key); v && (!v->is_string() || !v->get<std::string>().empty()))
        fail(concat("model.", key, " is not supported"));
    vocab.ignore_merges = flag(*m, "ignore_merges", false, "model");

    const json* v = get(*m, "vocab");
    if (!v || !v->is_object() || v->empty()) fail("model.vocab must be an object of token strings to ids");
    for (const auto& [token, value] : v->items()) ids.emplace(token, id(value, concat("model.vocab[", quote(token), "]")));

    const json* list = get(*m, "merges");
    if (!list || !list->is_array()) fail("model.merges must be an array");
    if (list->size() > 0x7fffffffu) fail("model.merges holds more than 2^31 - 1 merges");
    merges.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& merge = (*list)[i];
      // "left right" (tokenizers < 0.20) or ["left", "right"]
      if (merge.is_string()) {
        const std::string& text = merge.get_ref<const std::string&>();
        const std::size_t space = text.find(' ');
        if (space != std::string::npos && space > 0 && space + 1 < text.size() && text.find(' ', space + 1) == std::string::npos) {
          merges.emplace_back(text.substr(0, space), text.substr(space + 1));
          continue;
        }
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
        merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
        continue;
      }
      fail(concat("model.merges[", i, "] must be \"left right\" or [\"left\", \"right\"], found ", quote(infini::detail::json_text(merge))));
    }
  }

  // With a normalizer, added tokens must be matched in the text as given ("normalized":
  // false, as Qwen's are): those matched in normalized text are refused.
  std::vector<AddedToken> added_tokens(const json& root, bool normalizing) const {
    std::vector<AddedToken> added;
    const json* list = get(root, "added_tokens");
    if (!list) return added;
    if (!list->is_array()) fail("added_tokens must be an array");
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& token = (*list)[i];
      const std::string where = concat("added_tokens[", i, "]");
      if (!token.is_object() || !get(token, "id")) fail(concat(where, " must be an object with an id and a content"));
      std::string content = string(token, "content", where);
      if (content.empty()) fail(concat(where, ".content is empty"));
      if (normalizing && flag(token, "normalized", false, where))
        fail(concat(where, " ", quote(content), ": \"normalized\": true (matched in normalized text) is not supported"));
      added.push_back({std::move(content), static_cast<std::int32_t>(id(token["id"], where + ".id"))});
    }
    return added;
  }

  void decoder(const json& root) const {
    const json* d = get(root, "decoder");
    if (!d) return;
    if (!d->is_object() || string(*d, "type", "decoder") != "ByteLevel")
      fail(concat("decoder ", quote(infini::detail::json_text(*d)), " is not supported: expected ByteLevel (or null)"));
  }

  // True for NFC (Qwen), alone or in a Sequence; false for none (null, absent or an empty
  // Sequence). Any other normalizer changes text in ways not implemented here: refused.
  bool normalizer(const json& root) const {
    const json* n = get(root, "normalizer");
    if (!n) return false;
    auto name = [](const json& step) {
      const json* type = step.is_object() ? get(step, "type") : nullptr;
      return type && type->is_string() ? type->get<std::string>() : infini::detail::json_text(step);
    };
    auto refuse = [&](const std::string& where, const json& step) {
      fail(concat(where, " ", quote(name(step)), " is not supported: expected NFC, a Sequence of NFC, or null"));
    };
    if (name(*n) == "NFC") return true;
    const json* steps = n->is_object() ? get(*n, "normalizers") : nullptr;
    if (name(*n) != "Sequence" || !steps || !steps->is_array()) refuse("normalizer", *n);
    for (std::size_t i = 0; i < steps->size(); ++i)
      if (name((*steps)[i]) != "NFC") refuse(concat("normalizer.normalizers[", i, "]"), (*steps)[i]);
    return !steps->empty();
  }

  // The first SpecialToken of post_processor's single template (TemplateProcessing, alone or
  // in a Sequence): the token the model expects before each text, LLaMA-3's <|begin_of_text|>.
  static std::optional<std::string> template_bos(const json& root) {
    const json* p = get(root, "post_processor");
    if (!p || !p->is_object()) return std::nullopt;
    std::vector<const json*> processors = {p};
    if (const json* list = get(*p, "processors"); list && list->is_array())
      for (const json& q : *list) processors.push_back(&q);
    for (const json* q : processors) {
      const json* single = q->is_object() ? get(*q, "single") : nullptr;
      if (!single || !single->is_array() || single->empty() || !(*single)[0].is_object()) continue;
      const json* special = get((*single)[0], "SpecialToken");
      const json* name = special && special->is_object() ? get(*special, "id") : nullptr;
      if (name && name->is_string()) return name->get<std::string>();
    }
    return std::nullopt;
  }

 private:
  const char* op_;
  std::string where_;
};

// The id of the token whose bytes are `content`; added tokens first.
std::optional<std::int32_t> token_id(const BpeVocab& vocab, std::string_view content) {
  for (const AddedToken& t : vocab.added)
    if (t.content == content) return t.id;
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id)
    if (vocab.tokens[id] == content) return static_cast<std::int32_t>(id);
  return std::nullopt;
}

// tokenizer_config.json's bos_token / eos_token: a string, an AddedToken object
// ({"content": ...}) or null.
void read_config(const char* op, const std::filesystem::path& path, BpeVocab& vocab) {
  const Reader reader(op, path.string());
  const json config = reader.parse(path);
  for (const auto& [key, slot] : {std::pair{"bos_token", &vocab.bos}, std::pair{"eos_token", &vocab.eos}}) {
    const json* v = Reader::get(config, key);
    if (!v) continue;
    const std::string content = v->is_object() ? reader.string(*v, "content", key) : v->is_string() ? v->get<std::string>() : "";
    if (content.empty()) reader.fail(concat(key, " must be a token's text or {\"content\": text}"));
    *slot = token_id(vocab, content);
    if (!*slot) reader.fail(concat(key, " ", quote(content), " is not a token of the tokenizer"));
  }
}

}  // namespace

BpeVocab load_tokenizer_json(const char* op, const std::filesystem::path& tokenizer_json,
                             const std::optional<std::filesystem::path>& tokenizer_config) {
  const std::string where = tokenizer_json.string();
  const Reader reader(op, where);
  const json root = reader.parse(tokenizer_json);
  BpeVocab vocab;
  vocab.normalize_nfc = reader.normalizer(root);
  reader.decoder(root);
  vocab.pattern = reader.pattern(root);
  std::unordered_map<std::string, std::int64_t> ids;
  std::vector<std::pair<std::string, std::string>> merges;
  reader.model(root, vocab, ids, merges);
  vocab.added = reader.added_tokens(root, vocab.normalize_nfc);

  // Ids run 0..size-1 over the BPE vocabulary and the added tokens together.
  std::int64_t size = 0;
  for (const auto& [token, id] : ids) size = std::max(size, id + 1);
  for (const AddedToken& t : vocab.added) size = std::max<std::int64_t>(size, t.id + std::int64_t{1});
  if (static_cast<std::size_t>(size) > ids.size() + vocab.added.size())
    reader.fail(concat("ids run up to ", size - 1, " but model.vocab and added_tokens hold only ", ids.size(), " and ",
                       vocab.added.size(), " tokens: some ids have no token"));
  set_bpe_tokens(op, where + ": model.vocab", ids, static_cast<std::size_t>(size), vocab);
  for (const AddedToken& t : vocab.added) {
    std::string& slot = vocab.tokens[static_cast<std::size_t>(t.id)];
    if (!slot.empty() && slot != t.content)
      reader.fail(concat("added token ", quote(t.content), " has id ", t.id, ", which model.vocab gives to ", quote(slot)));
    slot = t.content;
  }
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id)
    if (vocab.tokens[id].empty()) reader.fail(concat("no token has id ", id, " (ids run 0..", size - 1, ")"));
  std::ranges::sort(vocab.added, [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });

  vocab.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string line = concat(where, ": model.merges[", i, "]");
    if (const auto earlier = add_merge(op, line, "model.vocab", ids, merges[i].first, merges[i].second,
                                       static_cast<std::int32_t>(i), vocab))
      reader.fail(concat("model.merges[", i, "] repeats model.merges[", *earlier, "]"));
  }

  if (const std::optional<std::string> bos = Reader::template_bos(root)) {
    vocab.bos = token_id(vocab, *bos);
    if (!vocab.bos) reader.fail(concat("post_processor's special token ", quote(*bos), " is not a token"));
  }
  if (tokenizer_config) read_config(op, *tokenizer_config, vocab);
  return vocab;
}

}  // namespace infini::text::detail
