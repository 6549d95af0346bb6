// json_text: a JSON value as text (nlohmann's dump), compiled in a unit that imports no
// module. dump() builds its output adapter with std::make_shared; a module unit that
// includes nlohmann also sees infini.std's make_shared, and clang 19 then takes the two
// copies of shared_ptr for different classes ("calling a private constructor"). Units of
// infini.nn and infini.parallel call this instead of dump().
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace infini::detail {
// indent < 0: one line; otherwise pretty-printed with `indent` spaces per level.
std::string json_text(const nlohmann::json& value, int indent = -1);
std::string json_text(const nlohmann::ordered_json& value, int indent = -1);
}  // namespace infini::detail
