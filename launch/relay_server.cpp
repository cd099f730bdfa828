// The relay (relay_server.h): one poll() loop over the ranks' sockets; requests are matched by
// (group, tag) for collectives, by (group, ordinal) for hellos and new_group, and in FIFO order per
// (group, source, destination) for point-to-point.
#include "launch/relay_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/comm/op.h"
#include "engine/comm/relay/protocol.h"
#include "launch/relay_arithmetic.h"
#include "launch/relay_state.h"

namespace tpsp::run {

namespace {

using comm::OpKind;
using comm::ReduceOp;
using comm::relay::Frame;
using comm::relay::Kind;
using comm::relay::Status;
using nlohmann::json;
using namespace relay_state;

class Relay {
 public:
  Relay(const std::vector<int>& fds, std::FILE* log, InputServer inputs)
      : log_(log), inputs_(std::move(inputs)) {
    for (int fd : fds) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      Conn c;
      c.fd = fd;
      conns_.push_back(std::move(c));
    }
  }

  void run() {
    for (;;) {
      std::vector<pollfd> pfds;
      std::vector<int> who;
      for (std::size_t r = 0; r < conns_.size(); ++r) {
        Conn& c = conns_[r];
        if (!c.open) continue;
        pfds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.size() > c.out_pos ? POLLOUT : 0)), 0});
        who.push_back(static_cast<int>(r));
      }
      if (pfds.empty()) return;
      if (::poll(pfds.data(), pfds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      for (std::size_t i = 0; i < pfds.size(); ++i) {
        const int r = who[i];
        if (!conns_[static_cast<std::size_t>(r)].open) continue;  // closed by an earlier event of this round
        if (pfds[i].revents & POLLOUT) flush(r);
        if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) receive(r);
        fail_closed();
      }
    }
  }

 private:
  // ---- the sockets ------------------------------------------------------------------------------

  void receive(int r) {
    Conn& c = conns_[static_cast<std::size_t>(r)];
    unsigned char buf[1 << 16];
    const ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) return close(r);
    c.in.insert(c.in.end(), buf, buf + n);
    // After every request too: one read can hold hundreds of requests, each of which may add a large
    // reply (an input; found by an attack, 2026-12-07: 4 GiB held from one rank).
    while (c.open && held(r) <= kHeldPerRank && c.in.size() >= sizeof(Frame)) {
      Frame f;
      std::memcpy(&f, c.in.data(), sizeof f);
      if (f.magic != comm::relay::kMagic || f.bytes > comm::relay::kMaxPayload)
        return violation(r, "a malformed frame (no magic, or a payload over the limit)");
      if (c.in.size() < sizeof f + f.bytes) return;
      Request q{
          r, f,
          Bytes(c.in.begin() + sizeof f, c.in.begin() + static_cast<std::ptrdiff_t>(sizeof f + f.bytes))};
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(sizeof f + f.bytes));
      handle(std::move(q));
    }
    if (c.open && held(r) > kHeldPerRank)
      violation(r, "it made the relay hold over 96 MiB (requests without peers, replies it does not read)");
  }

  void flush(int r) {
    Conn& c = conns_[static_cast<std::size_t>(r)];
    while (c.out_pos < c.out.size()) {
      const ssize_t n = ::write(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0) return close(r);
      c.out_pos += static_cast<std::size_t>(n);
    }
    c.out.clear();
    c.out_pos = 0;
  }

  void close(int r) {
    Conn& c = conns_[static_cast<std::size_t>(r)];
    if (!c.open) return;
    c.open = false;
    ::close(c.fd);
    closed_.push_back(r);  // its waiting peers are failed by fail_closed(), outside whatever loop closed it
  }

  /// Fails what waits for each rank closed since the last call (fail_waiting_for). Closing can happen
  /// deep inside a loop over the pending calls (a reply that cannot be written closes its rank), so the
  /// failing runs here, from the event loop, one closed rank at a time; ranks closed meanwhile queue up.
  void fail_closed() {
    while (!closed_.empty()) {
      const int r = closed_.front();
      closed_.pop_front();
      fail_waiting_for(r);
    }
  }

  /// Why a call cannot complete once world rank r's connection is gone.
  static std::string gone(int r) {
    return fmt::format(
        "rank {}'s connection to the relay closed before it made this call (it ended, crashed, or broke the "
        "relay's protocol)",
        r);
  }

  /// After rank r's connection closed: every call pending in a group r belongs to (a collective or a
  /// new_group: later calls of the group are refused at once, so it could never complete; a world's hello)
  /// and every point-to-point with r as the peer is answered with an error at once, so its ranks stop
  /// instead of waiting until their timeout.
  void fail_waiting_for(int r) {
    const auto fail = [&](const Request& q) {  // it no longer waits: its payload leaves the relay
      conns_[static_cast<std::size_t>(q.rank)].waiting_bytes -= q.payload.size();
      error(q, gone(r));
    };
    for (auto it = hellos_.begin(); it != hellos_.end();) {
      for (auto& q : it->second)
        if (q) fail(*q);
      it = hellos_.erase(it);
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      const auto g = groups_.find(it->first.first);
      const int gr = g == groups_.end() ? -1 : g->second.group_rank(r);
      if (gr < 0) {
        ++it;
        continue;
      }
      for (auto& q : it->second)
        if (q) fail(*q);
      it = pending_.erase(it);
    }
    for (auto& [key, queues] : p2p_) {
      const auto& [gid, src, dst] = key;
      const auto g = groups_.find(gid);
      const int gr = g == groups_.end() ? -1 : g->second.group_rank(r);
      if (gr < 0) continue;
      auto& [sends, recvs] = queues;
      if (dst == gr) {  // sends to r will never be taken
        for (const Request& q : sends) fail(q);
        sends.clear();
      }
      if (src == gr) {  // recvs from r will never be served
        for (const Request& q : recvs) fail(q);
        recvs.clear();
      }
    }
  }

  /// The world rank of a member of `grp` whose connection is closed, or -1.
  int closed_member(const Group& grp) const {
    for (int w : grp.ranks)
      if (!conns_[static_cast<std::size_t>(w)].open) return w;
    return -1;
  }

  void reply(const Request& q, Status st, const void* data, std::size_t bytes, uint32_t group = 0) {
    Conn& c = conns_[static_cast<std::size_t>(q.rank)];
    if (!c.open) return;
    Frame f;
    f.kind = Kind::reply;
    f.status = st;
    f.req = q.f.req;
    f.group = group;
    f.bytes = bytes;
    const auto* h = reinterpret_cast<const unsigned char*>(&f);
    c.out.insert(c.out.end(), h, h + sizeof f);
    const auto* p = static_cast<const unsigned char*>(data);
    if (bytes > 0) c.out.insert(c.out.end(), p, p + bytes);
    flush(q.rank);
  }

  void error(const Request& q, const std::string& text) { reply(q, Status::error, text.data(), text.size()); }

  void violation(int r, const std::string& what) {
    log({{"ctx", conns_[static_cast<std::size_t>(r)].hellos - 1}, {"rank", r}, {"violation", what}});
    close(r);
  }

  /// Bytes rank r makes the relay hold now.
  std::size_t held(int r) const {
    const Conn& c = conns_[static_cast<std::size_t>(r)];
    return c.in.size() + (c.out.size() - c.out_pos) + c.waiting_bytes;
  }

  /// Appends one line; false once the log is full (the last line then says so) or cannot be written.
  bool log(const json& line) {
    if (full_) return false;
    if (!log_) return true;  // tpsp-run --backend relay: a transport, no witness
    // Group names and phases come from the ranks' code: any bytes, replaced where not UTF-8.
    std::string s = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    if (logged_ + s.size() > kMaxLog) {
      full_ = true;
      s = json{{"ctx", -1},
               {"rank", line.value("rank", -1)},
               {"violation", "the relay's log is full (16 MiB): a flood"}}
              .dump() +
          "\n";
    }
    logged_ += s.size();
    if (std::fwrite(s.data(), 1, s.size(), log_) != s.size() || std::fflush(log_) != 0) {
      for (std::size_t r = 0; r < conns_.size(); ++r) close(static_cast<int>(r));  // no witness, no service
      full_ = true;
    }
    return !full_;
  }

  // ---- requests ---------------------------------------------------------------------------------

  void handle(Request q) {
    Conn& c = conns_[static_cast<std::size_t>(q.rank)];
    if (q.f.kind == Kind::hello) return hello(std::move(q));
    const auto g = groups_.find(q.f.group);
    const int gr = g == groups_.end() ? -1 : g->second.group_rank(q.rank);
    if (gr < 0)
      return violation(q.rank, fmt::format("a request in group id {}, of which it is no member", q.f.group));
    const Group& grp = g->second;
    const int n = static_cast<int>(grp.ranks.size());
    const bool op_ok = q.f.kind != Kind::collective || (q.f.op <= static_cast<uint8_t>(OpKind::barrier) &&
                                                        q.f.op != static_cast<uint8_t>(OpKind::send) &&
                                                        q.f.op != static_cast<uint8_t>(OpKind::recv));
    if (!op_ok || q.f.reduce > static_cast<uint8_t>(ReduceOp::max) ||
        ((q.f.kind == Kind::send || q.f.kind == Kind::recv) &&
         (q.f.arg < 0 || q.f.arg >= n || q.f.arg == gr)) ||
        (q.f.kind == Kind::recv && q.f.aux > comm::relay::kMaxPayload))
      return violation(q.rank, "a request with an unknown op, reduction or peer");
    if (q.f.kind == Kind::input) return input(grp, q);
    if (q.f.kind == Kind::mark) {  // the checker's scenario code entering a phase (ranks_main.cpp)
      if (!log({{"ctx", grp.ctx},
                {"rank", q.rank},
                {"kind", "mark"},
                {"phase", std::string(q.payload.begin(), q.payload.end())}}))
        return close(q.rank);
      return reply(q, Status::ok, nullptr, 0);
    }
    json line = {{"ctx", grp.ctx},
                 {"rank", q.rank},
                 {"gid", q.f.group},
                 {"kind", kind_name(q.f.kind)},
                 {"group", grp.name},
                 {"group_rank", gr},
                 {"group_size", n},
                 {"tag", q.f.tag},
                 {"bytes", q.f.kind == Kind::recv ? q.f.aux : q.f.bytes},
                 {"reduce", comm::reduce_op_name(static_cast<ReduceOp>(q.f.reduce))},
                 {"arg", q.f.arg}};
    line["op"] =
        q.f.kind == Kind::collective ? comm::op_name(static_cast<OpKind>(q.f.op)) : kind_name(q.f.kind);
    if (q.f.kind == Kind::collective && q.f.op == static_cast<uint8_t>(OpKind::all_to_all)) {
      SplitHeader h;  // the bytes it sends, and to whom (a malformed header fails the call, below)
      if (read_header(q.payload, static_cast<std::size_t>(n), h).empty()) {
        line["bytes"] = q.payload.size() - comm::relay::split_header_bytes(static_cast<uint64_t>(n));
        line["send_bytes"] = h.send;
        line["recv_bytes"] = h.recv;
      }
    }
    if (!log(line)) return close(q.rank);
    if (q.f.kind == Kind::collective || q.f.kind == Kind::new_group) {
      if (const int dead = closed_member(grp); dead >= 0) return error(q, gone(dead));
    } else if (q.f.kind == Kind::send || q.f.kind == Kind::recv) {  // arg: a group rank, checked above
      if (const int peer = grp.ranks[static_cast<std::size_t>(q.f.arg)];
          !conns_[static_cast<std::size_t>(peer)].open)
        return error(q, gone(peer));
    }
    switch (q.f.kind) {
      case Kind::collective: {
        const auto key = std::make_pair(q.f.group, q.f.tag);
        return arrive(
            pending_[key], gr, n, std::move(q),
            [this, grp](std::vector<Request>& all) { collective(grp, all); },
            [this, key] { pending_.erase(key); });
      }
      case Kind::new_group: {  // matched by the ordinal of the call in its parent group (it has no tag)
        const auto key =
            std::make_pair(q.f.group, 0x80000000u | static_cast<uint32_t>(c.new_groups[q.f.group]++));
        return arrive(
            pending_[key], gr, n, std::move(q),
            [this, grp](std::vector<Request>& all) { new_group(grp, all); },
            [this, key] { pending_.erase(key); });
      }
      case Kind::send:
      case Kind::recv:
        return p2p(gr, std::move(q));
      default:
        return violation(q.rank, "a request of an unknown kind");
    }
  }

  /// Files `q` as group rank gr's part of a call of n ranks; runs `done` once every part is there.
  template <class Done, class Erase>
  void arrive(std::vector<std::optional<Request>>& slot, int gr, int n, Request q, Done done, Erase erase) {
    if (slot.empty()) slot.resize(static_cast<std::size_t>(n));
    if (slot[static_cast<std::size_t>(gr)]) return violation(q.rank, "two requests under one tag");
    conns_[static_cast<std::size_t>(q.rank)].waiting_bytes += q.payload.size();
    slot[static_cast<std::size_t>(gr)] = std::move(q);
    if (std::any_of(slot.begin(), slot.end(), [](const auto& s) { return !s; })) return;
    std::vector<Request> all;
    for (auto& s : slot) {
      conns_[static_cast<std::size_t>(s->rank)].waiting_bytes -= s->payload.size();
      all.push_back(std::move(*s));
    }
    erase();
    done(all);
  }

  /// A scenario input, drawn and cut to what world rank q.rank may have by the input server.
  void input(const Group& grp, const Request& q) {
    if (q.payload.size() > 4096) return violation(q.rank, "an input request of over 4096 bytes");
    const std::string spec(q.payload.begin(), q.payload.end());
    if (!log({{"ctx", grp.ctx}, {"rank", q.rank}, {"kind", "input"}, {"spec", spec}})) return close(q.rank);
    if (!inputs_) return violation(q.rank, "asked for a scenario input, which this relay does not serve");
    const InputAnswer a = inputs_({grp.ctx, q.rank, spec});
    if (!a.violation.empty()) return violation(q.rank, a.violation);
    if (!a.error.empty()) return error(q, a.error);
    reply(q, Status::ok, a.bytes.data(), a.bytes.size());
  }

  void hello(Request q) {
    Conn& c = conns_[static_cast<std::size_t>(q.rank)];
    const int ctx = c.hellos++;
    if (ctx >= 4096) return violation(q.rank, "over 4096 worlds joined: a flood");
    log({{"ctx", ctx},
         {"rank", q.rank},
         {"kind", "hello"},
         {"group", "world"},
         {"group_rank", q.rank},
         {"group_size", conns_.size()},
         {"op", "hello"},
         {"tag", 0},
         {"bytes", q.f.bytes},
         {"reduce", "sum"},
         {"arg", -1}});
    const int n = static_cast<int>(conns_.size());
    for (int w = 0; w < n; ++w)
      if (!conns_[static_cast<std::size_t>(w)].open) return error(q, gone(w));
    auto& slot = hellos_[ctx];
    arrive(
        slot, q.rank, n, std::move(q),
        [this, ctx, n](std::vector<Request>& all) {
          Group g;
          g.ctx = ctx;
          g.key = std::string(all[0].payload.begin(), all[0].payload.end());
          g.name = "world";
          for (int r = 0; r < n; ++r) g.ranks.push_back(r);
          const uint32_t id = next_group_++;
          groups_[id] = g;
          for (const Request& r : all) reply(r, Status::ok, nullptr, 0, id);
        },
        [this, ctx] { hellos_.erase(ctx); });
  }

  void new_group(const Group& parent, std::vector<Request>& all) {
    if (std::any_of(all.begin(), all.end(), [&](const Request& r) { return r.payload != all[0].payload; })) {
      for (const Request& e : all)
        error(e, fmt::format("new_group mismatch in group {}: the ranks asked for different groups",
                             parent.name));
      return;
    }
    const Bytes& p = all[0].payload;
    const auto zero = std::find(p.begin(), p.end(), 0);
    const std::size_t members = static_cast<std::size_t>(p.end() - zero - 1) / sizeof(int32_t);
    if (zero == p.end() || members != all[0].f.aux || members == 0) {
      for (const Request& e : all) error(e, "a malformed new_group request");
      return;
    }
    Group g;
    g.ctx = parent.ctx;
    g.key.assign(p.begin(), zero);
    // ProcessGroup names a child "<parent key>.<n>-<name>" (process_group.cpp new_group).
    const std::size_t dash = g.key.find('-', std::min(g.key.size(), parent.key.size() + 1));
    g.name = dash == std::string::npos ? g.key : g.key.substr(dash + 1);
    for (std::size_t i = 0; i < members; ++i) {
      int32_t m = 0;
      std::memcpy(&m, &*(zero + 1 + static_cast<std::ptrdiff_t>(i * sizeof m)), sizeof m);
      if (m < 0 || m >= static_cast<int32_t>(parent.ranks.size())) {
        for (const Request& e : all) error(e, "new_group: a member outside the parent group");
        return;
      }
      g.ranks.push_back(parent.ranks[static_cast<std::size_t>(m)]);
    }
    const uint32_t id = next_group_++;
    groups_[id] = g;
    for (const Request& r : all) reply(r, Status::ok, nullptr, 0, g.group_rank(r.rank) >= 0 ? id : 0);
  }

  // ---- the collectives --------------------------------------------------------------------------

  static std::string call_str(const Request& r) {
    return fmt::format("{} ({} bytes{})", comm::op_name(static_cast<OpKind>(r.f.op)), r.f.bytes,
                       r.f.arg >= 0 ? fmt::format(", root {}", r.f.arg) : "");
  }

  void collective(const Group& g, std::vector<Request>& all) {
    const Request& a = all[0];
    const auto op = static_cast<OpKind>(a.f.op);
    const std::size_t n = all.size();
    for (std::size_t i = 1; i < n; ++i) {
      const Request& b = all[i];
      // broadcast: only the root's payload counts; all_to_all: the split headers are checked pairwise.
      const bool same_bytes = op == OpKind::broadcast || op == OpKind::all_to_all || b.f.bytes == a.f.bytes;
      if (b.f.op != a.f.op || b.f.reduce != a.f.reduce || b.f.arg != a.f.arg || !same_bytes) {
        const std::string text =
            fmt::format("collective mismatch in group {}: rank {} called {} where rank {} called {}", g.name,
                        b.rank, call_str(b), a.rank, call_str(a));
        for (const Request& e : all) error(e, text);
        return;
      }
    }
    std::vector<const Bytes*> inputs;
    for (const Request& r : all) inputs.push_back(&r.payload);
    const CollectiveResult res = carry_collective(op, static_cast<ReduceOp>(a.f.reduce), a.f.arg, inputs);
    for (std::size_t i = 0; i < n; ++i) {
      if (!res.error.empty())
        error(all[i], fmt::format("{} in group {}: {}", comm::op_name(op), g.name, res.error));
      else
        reply(all[i], Status::ok, res.out[i]->data(), res.out[i]->size());
    }
  }

  // ---- point-to-point ---------------------------------------------------------------------------

  void p2p(int gr, Request q) {
    const bool is_send = q.f.kind == Kind::send;
    const int src = is_send ? gr : q.f.arg, dst = is_send ? q.f.arg : gr;
    auto& [sends, recvs] = p2p_[{q.f.group, src, dst}];
    conns_[static_cast<std::size_t>(q.rank)].waiting_bytes += q.payload.size();
    (is_send ? sends : recvs).push_back(std::move(q));
    while (!sends.empty() && !recvs.empty()) {
      Request s = std::move(sends.front()), r = std::move(recvs.front());
      sends.pop_front();
      recvs.pop_front();
      conns_[static_cast<std::size_t>(s.rank)].waiting_bytes -= s.payload.size();
      if (s.payload.size() != r.f.aux) {
        const std::string text =
            fmt::format("a send of {} bytes met a recv of {} bytes (group rank {} to {})", s.payload.size(),
                        r.f.aux, src, dst);
        error(s, text);
        error(r, text);
        continue;
      }
      reply(r, Status::ok, s.payload.data(), s.payload.size());
      reply(s, Status::ok, nullptr, 0);
    }
  }

  std::deque<int> closed_;  // ranks closed whose waiting peers fail_closed() has not failed yet
  std::FILE* log_;
  InputServer inputs_;
  std::size_t logged_ = 0;  // bytes written to the log
  bool full_ = false;       // the log reached kMaxLog (or failed): every later request is refused
  std::vector<Conn> conns_;
  uint32_t next_group_ = 1;
  std::map<uint32_t, Group> groups_;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::optional<Request>>> pending_;
  std::map<int, std::vector<std::optional<Request>>> hellos_;
  std::map<std::tuple<uint32_t, int, int>, std::pair<std::deque<Request>, std::deque<Request>>> p2p_;
};

}  // namespace

void serve_relay(const std::vector<int>& fds, const std::string& log_path, const InputServer& inputs) {
  if (log_path.empty()) return Relay(fds, nullptr, inputs).run();
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);  // root's alone
  std::FILE* log = fd < 0 ? nullptr : ::fdopen(fd, "w");
  if (!log) {
    if (fd >= 0) ::close(fd);
    return;
  }
  Relay(fds, log, inputs).run();
  std::fclose(log);
}

}  // namespace tpsp::run
