// tpsp-run: the line relay (see output.h).
#include "launch/output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace tpsp::run {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout may be a non-blocking descriptor inherited from the caller: wait until it drains.
      struct pollfd pfd {
        fd, POLLOUT, 0
      };
      if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) return false;
      continue;
    }
    return false;
  }
  return true;
}

LineRelay::LineRelay(std::vector<int> ranks, std::size_t tail_lines, int out_fd, int err_fd)
    : tail_lines_(tail_lines), fds_{out_fd, err_fd} {
  slots_.resize(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    slots_[i].rank = ranks[i];
    slots_[i].prefix = "[rank " + std::to_string(ranks[i]) + "] ";
  }
}

void LineRelay::take_line(Slot& slot, Stream stream, std::string_view text, std::string& batch) {
  const std::size_t size = slot.prefix.size() + text.size() + 1;
  if (max_bytes_ > 0 && !slot.cut && slot.relayed + size > max_bytes_) {
    slot.cut = true;
    batch += slot.prefix + "(output cut here: over " + std::to_string(max_bytes_) + " bytes)\n";
  }
  if (!slot.cut) {
    batch += slot.prefix;
    batch += text;
    batch += '\n';
    slot.relayed += size;
  }
  ++slot.lines;
  if (tail_lines_ == 0) return;
  slot.tail.push_back(TailLine{stream, std::string(text)});
  while (slot.tail.size() > tail_lines_) slot.tail.pop_front();
}

void LineRelay::emit(Stream stream, const std::string& batch) {
  const int index = static_cast<int>(stream);
  if (batch.empty() || !fd_ok_[index]) return;
  if (!write_all(fds_[index], batch)) fd_ok_[index] = false;
}

void LineRelay::feed(std::size_t slot_index, Stream stream, std::string_view bytes) {
  Slot& slot = slots_[slot_index];
  std::string& pending = slot.pending[static_cast<int>(stream)];
  std::string batch;
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending.append(bytes);
      bytes = {};
    } else {
      pending.append(bytes.substr(0, newline));
      bytes.remove_prefix(newline + 1);
      take_line(slot, stream, pending, batch);
      pending.clear();
    }
    // A runaway line without newline: relay it in bounded pieces.
    while (pending.size() >= kMaxLineBytes) {
      take_line(slot, stream, std::string_view(pending).substr(0, kMaxLineBytes), batch);
      pending.erase(0, kMaxLineBytes);
    }
  }
  emit(stream, batch);
}

void LineRelay::finish(std::size_t slot_index, Stream stream) {
  Slot& slot = slots_[slot_index];
  std::string& pending = slot.pending[static_cast<int>(stream)];
  if (pending.empty()) return;
  std::string batch;
  take_line(slot, stream, pending, batch);
  pending.clear();
  emit(stream, batch);
}

}  // namespace tpsp::run
