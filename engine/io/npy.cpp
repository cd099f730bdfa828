#include "engine/io/npy.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/error.h"

namespace tpsp::io {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr const char* kFloatDescrs = "'<f4', '<f8'";
constexpr const char* kIntDescrs = "'<i8', '<i4'";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw NpyError(path + ": " + what);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

/// Whole file contents; NpyError naming the OS error when it cannot be opened or read.
std::string read_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, got);
  if (std::ferror(f.get())) fail(path, "read error");
  return bytes;
}

/// A cursor over the header dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2,), }.
class DictParser {
 public:
  DictParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  void skip_ws() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_ws();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) bad(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_ws();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) bad("expected a quoted string");
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) bad("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_ws();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t n = std::strlen(word);
      if (text_.compare(pos_, n, word) == 0) {
        pos_ += n;
        return value;
      }
    }
    bad("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (!peek(')')) {
      skip_ws();
      const std::size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == start) bad("expected a non-negative integer extent in 'shape'");
      const std::string digits = text_.substr(start, pos_ - start);
      if (digits.size() > 15) bad("extent " + digits + " is too large");
      shape.push_back(std::stoll(digits));
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long literal
      if (peek(',')) {
        ++pos_;
      } else if (!peek(')')) {
        bad("expected ',' or ')' in 'shape'");
      }
    }
    ++pos_;
    return shape;
  }
  [[noreturn]] void bad(const std::string& what) {
    fail(path_, "malformed header (" + what + " at offset " + std::to_string(pos_) + "): " + text_);
  }

 private:
  const std::string& path_;
  const std::string& text_;
  std::size_t pos_ = 0;
};

NpyHeader parse_header(const std::string& path, const std::string& bytes) {
  if (bytes.size() < kMagicLen + 2 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0) {
    fail(path, "not a .npy file (missing the \\x93NUMPY magic string)");
  }
  NpyHeader h;
  h.major = static_cast<unsigned char>(bytes[6]);
  h.minor = static_cast<unsigned char>(bytes[7]);
  std::size_t len_bytes = 0;
  if (h.major == 1) {
    len_bytes = 2;
  } else if (h.major == 2 || h.major == 3) {
    len_bytes = 4;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(h.major) + "." + std::to_string(h.minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t pre = kMagicLen + 2 + len_bytes;
  if (bytes.size() < pre) fail(path, "truncated header length field");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) {
    header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[kMagicLen + 2 + i])) << (8 * i);
  }
  if (bytes.size() < pre + header_len) {
    fail(path, "truncated header: it claims " + std::to_string(header_len) + " bytes but the file has " +
                   std::to_string(bytes.size() - pre) + " after the length field");
  }
  h.data_offset = pre + header_len;
  const std::string text = bytes.substr(pre, header_len);

  DictParser p(path, text);
  bool has_descr = false, has_order = false, has_shape = false;
  p.expect('{');
  while (!p.peek('}')) {
    const std::string key = p.string_literal();
    p.expect(':');
    if (key == "descr") {
      if (p.peek('[')) fail(path, "structured (record) dtypes are not supported: " + text);
      h.descr = p.string_literal();
      has_descr = true;
    } else if (key == "fortran_order") {
      h.fortran_order = p.boolean();
      has_order = true;
    } else if (key == "shape") {
      h.shape = p.tuple();
      has_shape = true;
    } else {
      p.bad("unexpected key '" + key + "'");
    }
    if (p.peek(',')) {
      p.expect(',');
    } else if (!p.peek('}')) {
      p.bad("expected ',' or '}'");
    }
  }
  if (!has_descr || !has_order || !has_shape) {
    fail(path, "header lacks one of the keys 'descr', 'fortran_order', 'shape': " + text);
  }
  return h;
}

/// Checks the order and the data length for `itemsize`-byte elements; returns the element count.
std::size_t check_data(const std::string& path, const NpyHeader& h, std::size_t file_size,
                       std::size_t itemsize) {
  if (h.fortran_order) {
    fail(path,
         "Fortran-ordered arrays are not supported (save a C-contiguous array, e.g. np.ascontiguousarray)");
  }
  std::size_t numel = 1;
  for (int64_t e : h.shape) {
    if (__builtin_mul_overflow(numel, static_cast<std::size_t>(e), &numel)) {
      fail(path, "shape " + shape_str(h.shape) + " is too large");
    }
  }
  std::size_t want = 0;
  if (__builtin_mul_overflow(numel, itemsize, &want))
    fail(path, "shape " + shape_str(h.shape) + " is too large");
  const std::size_t have = file_size - h.data_offset;
  if (have < want) {
    fail(path, "truncated data: shape " + shape_str(h.shape) + " of '" + h.descr + "' needs " +
                   std::to_string(want) + " bytes but the file has " + std::to_string(have));
  }
  if (have > want) {
    fail(path, std::to_string(have - want) + " unexpected trailing bytes after the data of shape " +
                   shape_str(h.shape) + " of '" + h.descr + "'");
  }
  return numel;
}

std::string shape_tuple(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += std::to_string(shape[i]) + (i + 1 < shape.size() ? ", " : "");
  if (shape.size() == 1) s += ",";
  return s + ")";
}

void write_file(const std::string& path, const std::string& descr, const Shape& shape, const void* data,
                std::size_t nbytes) {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  // Pad with spaces so that preamble + header (ending in '\n') is a multiple of 64 bytes; use
  // version 2.0 (4-byte length) only when the padded header does not fit in a uint16.
  auto padded_len = [&](std::size_t pre) { return (pre + dict.size() + 1 + 63) / 64 * 64 - pre; };
  const int major = padded_len(10) <= 65535 ? 1 : 2;
  const std::size_t pre = major == 1 ? 10 : 12;
  dict.append(padded_len(pre) - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const std::size_t header_len = dict.size();
  for (std::size_t i = 0; i < pre - kMagicLen - 2; ++i)
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  out += dict;

  File f(std::fopen(path.c_str(), "wb"));
  if (!f) fail(path, std::string("cannot open for writing: ") + std::strerror(errno));
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size() ||
      (nbytes > 0 && std::fwrite(data, 1, nbytes, f.get()) != nbytes)) {
    fail(path, std::string("write error: ") + std::strerror(errno));
  }
  if (std::fclose(f.release()) != 0) fail(path, std::string("write error on close: ") + std::strerror(errno));
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
  return parse_header(path, read_file(path));
}

Tensor load_npy(const std::string& path) {
  const std::string bytes = read_file(path);
  const NpyHeader h = parse_header(path, bytes);
  const char* src = bytes.data() + h.data_offset;
  if (h.descr == "<f4") {
    const std::size_t n = check_data(path, h, bytes.size(), 4);
    Tensor t(h.shape);
    if (n > 0) std::memcpy(t.data(), src, n * 4);
    return t;
  }
  if (h.descr == "<f8") {
    const std::size_t n = check_data(path, h, bytes.size(), 8);
    Tensor t(h.shape);
    float* dst = t.data();
    for (std::size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    }
    return t;
  }
  if (h.descr == "<i8" || h.descr == "<i4") {
    fail(path, "dtype '" + h.descr + "' is an integer type; load it with load_npy_int (load_npy reads " +
                   kFloatDescrs + ")");
  }
  fail(path, "unsupported dtype '" + h.descr + "' for load_npy (supported: " + kFloatDescrs + ")");
}

void save_npy(const std::string& path, const Tensor& t) {
  TPSP_CHECK(t.defined(), "save_npy(", path, "): the tensor is undefined");
  TPSP_CHECK(t.dtype() == DType::f32 && t.device() == Device::cpu, "save_npy(", path,
             "): only f32 cpu tensors ", "can be saved, got ", dtype_name(t.dtype()));
  write_file(path, "<f4", t.shape(), t.data(), t.nbytes());
}

std::vector<int64_t> load_npy_int(const std::string& path, Shape* shape) {
  const std::string bytes = read_file(path);
  const NpyHeader h = parse_header(path, bytes);
  const char* src = bytes.data() + h.data_offset;
  std::vector<int64_t> values;
  if (h.descr == "<i8") {
    values.resize(check_data(path, h, bytes.size(), 8));
    if (!values.empty()) std::memcpy(values.data(), src, values.size() * 8);
  } else if (h.descr == "<i4") {
    values.resize(check_data(path, h, bytes.size(), 4));
    for (std::size_t i = 0; i < values.size(); ++i) {
      int32_t v;
      std::memcpy(&v, src + 4 * i, 4);
      values[i] = v;
    }
  } else if (h.descr == "<f4" || h.descr == "<f8") {
    fail(path, "dtype '" + h.descr + "' is a float type; load it with load_npy (load_npy_int reads " +
                   kIntDescrs + ")");
  } else {
    fail(path, "unsupported dtype '" + h.descr + "' for load_npy_int (supported: " + kIntDescrs + ")");
  }
  if (shape) *shape = h.shape;
  return values;
}

void save_npy_int(const std::string& path, const std::vector<int64_t>& values, const Shape& shape) {
  for (int64_t e : shape)
    TPSP_CHECK(e >= 0, "save_npy_int(", path, "): negative extent in shape ", shape_str(shape));
  TPSP_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "save_npy_int(", path, "): shape ",
             shape_str(shape), " holds ", shape_numel(shape), " elements but ", values.size(),
             " values were given");
  write_file(path, "<i8", shape, values.data(), values.size() * 8);
}

}  // namespace tpsp::io
