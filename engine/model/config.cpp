#include "reference/config.h"

#include "engine/error.h"

namespace tpsp {

void GPTConfig::validate() const {
  TPSP_CHECK(vocab > 0 && seq > 0 && hidden > 0 && heads > 0 && layers > 0 && ffn >= 0,
             "GPT sizes must be positive: ", str());
  TPSP_CHECK(hidden % heads == 0, "hidden=", hidden, " is not divisible by heads=", heads);
  TPSP_CHECK(dropout >= 0.f && dropout < 1.f, "dropout p=", dropout, " is outside [0, 1)");
  TPSP_CHECK(label_smoothing >= 0.f && label_smoothing <= 1.f, "label_smoothing=", label_smoothing,
             " is outside [0, 1]");
}

std::string GPTConfig::str() const {
  return detail::cat("V=", vocab, " s=", seq, " h=", hidden, " heads=", heads, " layers=", layers,
                     " ffn=", ffn_hidden(), " dropout=", dropout, tied ? " tied" : " untied");
}

}  // namespace tpsp
