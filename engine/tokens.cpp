#include "engine/tokens.h"

#include "engine/error.h"

namespace tpsp {

void validate_tokens(const TokenBatch& t, int64_t vocab, bool allow_ignore, const char* what) {
  TPSP_CHECK(t.b >= 0 && t.s >= 0 && static_cast<int64_t>(t.ids.size()) == t.b * t.s, what, ": ",
             t.ids.size(), " ids do not fill [b, s] = [", t.b, ", ", t.s, "]");
  for (int64_t bi = 0; bi < t.b; ++bi) {
    for (int64_t si = 0; si < t.s; ++si) {
      const int64_t id = t.at(bi, si);
      if (allow_ignore && id == kIgnoreIndex) continue;
      TPSP_CHECK(id >= 0 && id < vocab, what, ": token id ", id, " at [", bi, ", ", si, "] is outside [0, ",
                 vocab, ")", allow_ignore ? " and is not ignore_index -100" : "");
    }
  }
}

}  // namespace tpsp
