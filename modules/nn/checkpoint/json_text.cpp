// See json_text.h: not a module unit on purpose.
#include "json_text.h"

#include <nlohmann/json.hpp>

namespace infini::detail {
std::string json_text(const nlohmann::json& value, int indent) { return value.dump(indent); }
std::string json_text(const nlohmann::ordered_json& value, int indent) { return value.dump(indent); }
}  // namespace infini::detail
