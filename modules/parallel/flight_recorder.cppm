// FlightRecorder: each rank's ring of its last N communication operations (op, group,
// peers, tensor, bytes, sequence number, state, times). It is written to stderr, and to
// $INFINI_FLIGHT_RECORDER_DIR/rank_<r>.txt when that is set, on a timeout, on an error
// and on SIGTERM, so that the user sees which rank stopped where.
//
// Records are fixed-size and preformatted so that dump() only copies bytes and formats
// integers: it is async-signal-safe and runs from the SIGTERM handler.
export module infini.parallel:flight_recorder;
import infini.std;

export namespace infini::parallel {

enum class OpState : std::uint8_t { Scheduled, Completed, Failed, TimedOut };

struct OpRecord {
  std::uint64_t id = 0;        // 1, 2, ... over the process; 0: empty slot
  std::uint64_t seq = 0;       // sequence number in its group
  std::int64_t start_ns = 0;   // since the recorder started (steady clock)
  std::int64_t end_ns = -1;    // -1 while scheduled
  std::int64_t bytes = 0;
  OpState state = OpState::Scheduled;
  char op[24] = {};
  char group[40] = {};
  char peers[48] = {};
  char tensor[96] = {};
};

class FlightRecorder {
 public:
  // The process's recorder. Its size is $INFINI_FLIGHT_RECORDER_SIZE (default 512).
  static FlightRecorder& instance();

  // Rank and world size shown in dumps and in the file name.
  void set_rank(int rank, int world_size);
  // Dumps on SIGTERM, then lets the signal terminate the process.
  void install_sigterm_handler();

  std::uint64_t start(std::string_view op, std::string_view group, std::string_view peers, std::string_view tensor,
                      std::uint64_t seq, std::int64_t bytes);
  void finish(std::uint64_t id, OpState state);

  // Writes the records (oldest first) to stderr and to the directory, if set. Each reason
  // dumps at most once per process except SIGTERM, which always dumps.
  void dump(std::string_view reason) noexcept;
  // Writes the records to `fd`. Async-signal-safe.
  void write_to(int fd, std::string_view reason) const noexcept;

  std::vector<OpRecord> snapshot() const;  // oldest first (for tests and tools)

 private:
  FlightRecorder();
  std::vector<OpRecord> ring_;
  std::uint64_t next_id_ = 1;
  int rank_ = 0, world_size_ = 1;
  char file_[512] = {};  // "<dir>/rank_<r>.txt" or empty
  bool dumped_ = false;
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace infini::parallel
