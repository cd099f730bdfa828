// tpsp-run: the line relay. Bytes read from the ranks' stdout/stderr pipes arrive in arbitrary chunks;
// the relay cuts them into whole lines, prefixes each with "[rank R] " and writes complete lines only,
// to the launcher's stdout (for the ranks' stdout) or stderr (for their stderr). Since one thread owns
// both output descriptors and each write holds whole lines, lines of different ranks never interleave
// mid-line. It also keeps the last K lines of every rank for the failure summary.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace tpsp::run {

// Which of a rank's two output streams a byte came from.
enum class Stream { kOut = 0, kErr = 1 };

// One remembered line of a rank (without prefix and without the trailing newline).
struct TailLine {
  Stream stream = Stream::kOut;
  std::string text;
};

// Writes all of `data` to `fd`, retrying on EINTR and short writes and waiting (poll) when the
// descriptor is non-blocking and full. Returns false on any other error (e.g. EPIPE: the reader went
// away); the caller then stops writing to that descriptor.
bool write_all(int fd, std::string_view data);

class LineRelay {
 public:
  // A line longer than this many bytes is emitted in pieces of this size (each piece prefixed), so one
  // rank that never writes a newline cannot make the launcher buffer without bound.
  static constexpr std::size_t kMaxLineBytes = 64 * 1024;

  // `ranks[slot]` is the rank number shown in the prefix of slot `slot`; `tail_lines` is K, the number
  // of lines kept per rank (0 keeps none); `out_fd`/`err_fd` receive the relayed stdout/stderr lines.
  LineRelay(std::vector<int> ranks, std::size_t tail_lines, int out_fd = 1, int err_fd = 2);

  // Takes `bytes` read from stream `stream` of slot `slot`: completes and relays every finished line,
  // keeps the unfinished rest. Write errors disable that output descriptor (see write_all).
  void feed(std::size_t slot, Stream stream, std::string_view bytes);

  // End of file on that stream: relays a pending unfinished line (a newline is added).
  void finish(std::size_t slot, Stream stream);

  // The last lines of slot `slot`, oldest first, both streams in arrival order.
  const std::deque<TailLine>& tail(std::size_t slot) const { return slots_[slot].tail; }

  // Relays at most `bytes` (prefixes included) per rank, then one line saying the rest was cut (the
  // tail still follows every line): a rank that prints without end cannot fill the log's disk. 0 (the
  // default): no bound.
  void limit_bytes_per_rank(std::size_t bytes) { max_bytes_ = bytes; }

  // The rank number shown for slot `slot`.
  int rank_of(std::size_t slot) const { return slots_[slot].rank; }

  // Total number of lines relayed so far for slot `slot` (both streams).
  std::size_t line_count(std::size_t slot) const { return slots_[slot].lines; }

 private:
  struct Slot {
    int rank = 0;
    std::string prefix;      // "[rank R] "
    std::string pending[2];  // unfinished line per stream
    std::deque<TailLine> tail;
    std::size_t lines = 0;
    std::size_t relayed = 0;  // bytes written for this rank so far
    bool cut = false;         // the bound was reached: nothing more is written
  };

  // Appends one finished line to `batch` (prefixed, newline-terminated) and to the slot's tail.
  void take_line(Slot& slot, Stream stream, std::string_view text, std::string& batch);
  // Writes a batch of whole lines to the descriptor of `stream` unless it was disabled.
  void emit(Stream stream, const std::string& batch);

  std::vector<Slot> slots_;
  std::size_t tail_lines_;
  int fds_[2];
  bool fd_ok_[2] = {true, true};
  std::size_t max_bytes_ = 0;
};

}  // namespace tpsp::run
