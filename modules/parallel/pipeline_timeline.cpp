// Pipeline timelines: measures and renderings (see pipeline_timeline.cppm).
module;
#include <cmath>
#include <cstdio>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

std::string label(const TimelineEvent& e, int chunks) {
  std::string s = concat(letter(e.op), e.micro);
  if (chunks > 1) s += concat(".", e.chunk);
  return s;
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

const char* color(PipelineOp op) {
  switch (op) {
    case PipelineOp::Forward: return "#4e79a7";
    case PipelineOp::Backward: return "#e15759";
    case PipelineOp::BackwardInput: return "#f28e2b";
    case PipelineOp::BackwardWeight: return "#59a14f";
  }
  return "#999999";
}

}  // namespace

double PipelineTimeline::step_time() const {
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& events : ranks)
    for (const TimelineEvent& e : events) {
      first = std::min(first, e.start);
      last = std::max(last, e.end);
    }
  return last > first ? last - first : 0.0;
}

double PipelineTimeline::busy_time(int rank) const {
  double busy = 0;
  for (const TimelineEvent& e : ranks.at(static_cast<std::size_t>(rank))) busy += e.end - e.start;
  return busy;
}

double PipelineTimeline::bubble_fraction() const {
  const double step = step_time();
  if (step <= 0 || ranks.empty()) return 0.0;
  double busy = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) busy += busy_time(static_cast<int>(r));
  return 1.0 - busy / (static_cast<double>(ranks.size()) * step);
}

int PipelineTimeline::peak_activations(int rank) const {
  int held = 0, peak = 0;
  for (const TimelineEvent& e : ranks.at(static_cast<std::size_t>(rank))) {
    if (e.op == PipelineOp::Forward) peak = std::max(peak, ++held);
    if (e.op == PipelineOp::Backward || e.op == PipelineOp::BackwardInput) --held;
  }
  return peak;
}

std::string PipelineTimeline::text(int width) const {
  const double step = step_time();
  double first = std::numeric_limits<double>::infinity();
  for (const auto& events : ranks)
    for (const TimelineEvent& e : events) first = std::min(first, e.start);
  std::string out;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::string row(static_cast<std::size_t>(width), '.');
    for (const TimelineEvent& e : ranks[r]) {
      // The columns whose centres fall inside the op.
      for (int c = 0; c < width && step > 0; ++c) {
        const double t = first + (c + 0.5) * step / width;
        if (t >= e.start && t < e.end) row[static_cast<std::size_t>(c)] = letter(e.op);
      }
    }
    out += concat("rank ", r, " |", row, "|\n");
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += concat("rank ", r, ":");
    for (const TimelineEvent& e : ranks[r]) out += " " + label(e, shape.virtual_stages);
    out += "\n";
  }
  return out;
}

std::string PipelineTimeline::svg() const {
  const double step = step_time(), scale = step > 0 ? 1000.0 / step : 0.0;  // 1000 px for the step
  double first = std::numeric_limits<double>::infinity();
  for (const auto& events : ranks)
    for (const TimelineEvent& e : events) first = std::min(first, e.start);
  const int row = 28, left = 60, height = static_cast<int>(ranks.size()) * row + 30;
  std::string out = concat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", left + 1010, "\" height=\"", height,
                           "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int y = static_cast<int>(r) * row + 4;
    out += concat("<text x=\"4\" y=\"", y + 17, "\">rank ", r, "</text>\n");
    for (const TimelineEvent& e : ranks[r]) {
      const double x = left + (e.start - first) * scale, w = std::max((e.end - e.start) * scale, 0.5);
      out += concat("<rect x=\"", fixed(x, 2), "\" y=\"", y, "\" width=\"", fixed(w, 2), "\" height=\"", row - 6,
                    "\" fill=\"", color(e.op), "\" stroke=\"white\"><title>", name(e.op), " micro-batch ", e.micro,
                    " chunk ", e.chunk, ": ", fixed(e.start - first, 6), " .. ", fixed(e.end - first, 6),
                    " s</title></rect>\n");
      if (w > 14)
        out += concat("<text x=\"", fixed(x + w / 2, 2), "\" y=\"", y + 15, "\" fill=\"white\" text-anchor=\"middle\">",
                      label(e, shape.virtual_stages), "</text>\n");
    }
  }
  out += concat("<text x=\"", left, "\" y=\"", height - 8, "\">step ", fixed(step * 1000, 3), " ms, bubble ",
                fixed(bubble_fraction() * 100, 1), "% (F forward, B backward, b input gradient, W weight gradients)</text>\n");
  return out + "</svg>\n";
}

std::string PipelineTimeline::chrome_trace() const {
  std::string out = "{\"traceEvents\": [";
  bool comma = false;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const TimelineEvent& e : ranks[r]) {
      out += concat(comma ? ",\n" : "\n", "{\"name\": \"", label(e, shape.virtual_stages), "\", \"cat\": \"", name(e.op),
                    "\", \"ph\": \"X\", \"ts\": ", fixed(e.start * 1e6, 3), ", \"dur\": ", fixed((e.end - e.start) * 1e6, 3),
                    ", \"pid\": 0, \"tid\": ", r, ", \"args\": {\"micro_batch\": ", e.micro, ", \"chunk\": ", e.chunk, "}}");
      comma = true;
    }
  return out + "\n], \"displayTimeUnit\": \"ms\"}\n";
}

double theoretical_bubble(std::string_view schedule, const PipelineShape& shape, double forward, double backward_input,
                          double backward_weight) {
  const double p = shape.stages, m = shape.micro_batches, v = shape.virtual_stages;
  const double work = m * (forward + backward_input + backward_weight);
  double bubble = (p - 1) * (forward + backward_input + backward_weight);  // gpipe, 1f1b
  if (schedule == "interleaved") bubble /= v;
  if (schedule == "zb-h1") bubble = (p - 1) * (forward + backward_input - backward_weight);
  return bubble / (work + bubble);
}

}  // namespace infini::parallel
