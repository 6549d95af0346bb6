// A Hugging Face config.json, read and checked key by key, for the model families' mappings
// (hf_model.cpp, the families' files). A plain header over nlohmann::json, included in the
// global module fragment of the units that read config.json; errors go through `fail`, which
// throws (an IOError naming the op and the directory).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "json_text.h"

namespace infini::hf::detail {

class ConfigJson {
 public:
  using Json = nlohmann::json;
  using Fail = std::function<void(const std::string&)>;  // throws

  // `text`: config.json's contents; fails unless it is a JSON object.
  ConfigJson(const std::string& text, Fail fail) : fail_(std::move(fail)) {
    json_ = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (json_.is_discarded()) fail_("config.json is not JSON");
    if (!json_.is_object()) fail_("config.json is not a JSON object");
  }

  // The integer `key` (>= 1); `fallback` when absent or null (none: the key is required).
  std::int64_t size(const char* key, std::optional<std::int64_t> fallback = std::nullopt) const {
    const Json* v = find(key);
    if (!v) {
      if (!fallback) fail_(std::string("config.json has no \"") + key + "\"");
      return *fallback;
    }
    if (!v->is_number_integer() || v->get<std::int64_t>() < 1)
      fail_(std::string("config.json: \"") + key + "\" must be a positive integer, got " + infini::detail::json_text(*v));
    return v->get<std::int64_t>();
  }
  double number(const char* key, double fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) fail_(std::string("config.json: \"") + key + "\" must be a number, got " + infini::detail::json_text(*v));
    return v->get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean())
      fail_(std::string("config.json: \"") + key + "\" must be true or false, got " + infini::detail::json_text(*v));
    return v->get<bool>();
  }
  // `key` must be absent, null or satisfy `ok`; else an error saying Infini needs `expected`.
  template <class Ok>
  void require(const char* key, Ok&& ok, std::string_view expected) const {
    const Json* v = find(key);
    if (!v || ok(*v)) return;
    fail_(std::string("config.json: \"") + key + "\" is " + infini::detail::json_text(*v) + "; Infini's model needs " +
          std::string(expected));
  }
  // The value of `key`, or null when absent or null.
  const Json* find(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  void fail(const std::string& message) const { fail_(message); }

 private:
  Fail fail_;
  Json json_;
};

}  // namespace infini::hf::detail
