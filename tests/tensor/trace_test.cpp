// trace: events only while recording, kernel calls inside a span on its track and within its
// time, and Chrome trace files written, merged (each process keeps its pid) and validated.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
import infini.tensor;

namespace trace_test {
using namespace infini;

namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(Trace, KernelCallsAreRecordedInsideTheirSpanOnlyWhileRecording) {
  trace::take_events();
  const Tensor a = full({64}, 2.0);
  (void)a.to(kFloat64);  // not recording: nothing
  EXPECT_TRUE(trace::take_events().empty());
  trace::set_recording(true);
  {
    const trace::Span outer("convert", "test");
    (void)a.to(kFloat64);
  }
  trace::set_recording(false);
  (void)a.to(kFloat64);
  const std::vector<trace::Event> events = trace::take_events();
  const auto outer = std::find_if(events.begin(), events.end(), [](const auto& e) { return e.category == "test"; });
  ASSERT_NE(outer, events.end());
  EXPECT_EQ(outer->name, "convert");
  const auto ops = std::count_if(events.begin(), events.end(), [&](const trace::Event& e) {
    return e.category == "op" && e.track == outer->track && e.ts_us >= outer->ts_us &&
           e.ts_us + e.duration_us <= outer->ts_us + outer->duration_us;
  });
  EXPECT_GE(ops, 1);  // the conversion's kernel, within the span
  EXPECT_EQ(events.size(), static_cast<std::size_t>(ops) + 1);  // nothing after recording stopped
  EXPECT_TRUE(trace::take_events().empty());
}

TEST(Trace, ChromeFilesMergeWithTheirPidsAndEscapedNames) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "infini_trace_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<trace::Event> first = {
      {.name = "say \"hi\"\n", .category = "op", .ts_us = 10, .duration_us = 5, .track = 0, .id = 0, .args = {}}};
  const std::vector<trace::Event> second = {
      {.name = "all_reduce", .category = "comm", .phase = 'b', .ts_us = 12, .id = 7, .args = "\"bytes\": 64"},
      {.name = "all_reduce", .category = "comm", .phase = 'e', .ts_us = 20, .id = 7, .args = {}}};
  trace::write_chrome_file(dir / "rank_0.json", first, 0, "rank 0");
  trace::write_chrome_file(dir / "rank_1.json", second, 1, "rank 1");
  trace::merge_chrome_files({dir / "rank_0.json", dir / "rank_1.json"}, dir / "trace.json");
  const std::string merged = read(dir / "trace.json");
  EXPECT_EQ(count(merged, "\"ph\": "), 5u);  // two process names and three events
  EXPECT_EQ(count(merged, "\"name\": \"process_name\", \"pid\": 0"), 1u);
  EXPECT_EQ(count(merged, "\"name\": \"process_name\", \"pid\": 1"), 1u);
  EXPECT_EQ(count(merged, "\"say \\\"hi\\\"\\u000a\""), 1u);
  EXPECT_EQ(count(merged, "\"ph\": \"X\", \"name\": \"say"), 1u);
  EXPECT_EQ(count(merged, "\"dur\": 5"), 1u);
  EXPECT_EQ(count(merged, "\"id\": \"1.7\", \"args\": {\"bytes\": 64}"), 1u);  // ids apart per process
  EXPECT_FALSE(std::filesystem::exists(dir / "trace.json.tmp"));
  // A file of another form, or none, is an IOError naming it.
  std::ofstream(dir / "other.json") << "{}";
  EXPECT_THROW(trace::merge_chrome_files({dir / "rank_0.json", dir / "other.json"}, dir / "bad.json"), IOError);
  EXPECT_THROW(trace::merge_chrome_files({dir / "missing.json"}, dir / "bad.json"), IOError);
  // Framed like one but not one: the header and footer sharing their newline (no events), and
  // events that are not JSON. Merged, either would have made invalid JSON (trace_merge_fuzz).
  const std::string header = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  std::ofstream(dir / "overlap.json") << header << "]}\n";
  std::ofstream(dir / "junk.json") << header << "{\"ph\": \"X\"}, junk\n]}\n";
  // A NUL byte ends the JSON parser's input: "]\0{...}" once passed as an empty list (found by
  // trace_merge_fuzz).
  std::ofstream(dir / "nul.json", std::ios::binary) << header << std::string("]\0{\"ph\": 1}", 11) << "\n]}\n";
  // No events at all (not even the process name) once merged as ",\n" + nothing: a trailing
  // comma (found by trace_merge_fuzz).
  std::ofstream(dir / "empty.json") << header << "\n]}\n";
  std::ofstream(dir / "blank.json") << header << " \n\n]}\n";
  for (const char* name : {"overlap.json", "junk.json", "nul.json", "empty.json", "blank.json"}) {
    try {
      trace::merge_chrome_files({dir / "rank_0.json", dir / name}, dir / "bad.json");
      ADD_FAILURE() << name << " was merged";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + " is not a trace file written by write_chrome_file"),
                std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.json"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trace_test
