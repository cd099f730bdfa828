// Reading and writing NumPy .npy files, the format ranks use to dump tensors for a grader process
// and the format of the PyTorch goldens (tools/make_goldens.py).
//
// Format (NumPy NEP 1, numpy/lib/format.py): the magic "\x93NUMPY", a major and a minor version
// byte, the header length (uint16 little-endian for v1.0, uint32 for v2.0 and v3.0), then an
// ASCII header holding a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by '\n' so that the data starts on a 64-byte boundary, then the
// raw elements in row-major (C) order.
//
// Supported here: versions 1.0, 2.0 and 3.0; C order only; little-endian dtypes
//   '<f4' float32, '<f8' float64 (read as float32, rounded to nearest) — for load_npy;
//   '<i8' int64, '<i4' int32 (read as int64)                           — for load_npy_int.
// Writers emit version 1.0 ('<f4' or '<i8'), or 2.0 when the header would not fit in 65535 bytes.
// Every error names the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace tpsp::io {

/// Raised when a .npy file cannot be opened, read or written, or is malformed or of an
/// unsupported kind (wrong magic, big-endian or unknown dtype, Fortran order, truncated data).
/// The message starts with the path, e.g. "x.npy: unsupported dtype '<f2' (supported: ...)".
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The parsed header of a .npy file.
struct NpyHeader {
  int major = 1;  ///< format version (1, 2 or 3)
  int minor = 0;
  std::string descr;  ///< dtype string as written, e.g. "<f4"
  bool fortran_order = false;
  Shape shape;                  ///< [] for a 0-d array
  std::size_t data_offset = 0;  ///< byte offset of the first element
};

/// Reads and validates only the header of `path`. Throws NpyError for a missing or unreadable
/// file, a bad magic string, an unknown version or an unparsable header dict.
NpyHeader read_npy_header(const std::string& path);

/// Loads a float array as a float32 Tensor of the stored shape (a 0-d array gives shape []).
/// Accepts '<f4' and '<f8' (each float64 rounded to the nearest float32).
/// Throws NpyError for a missing file, another dtype (an integer file names load_npy_int),
/// Fortran order, or data shorter or longer than the shape says.
Tensor load_npy(const std::string& path);

/// Saves a float32 CPU tensor as '<f4' with its shape (a tensor of shape [] becomes a 0-d array).
/// Throws NpyError when the file cannot be written and ShapeError for a tensor that is undefined
/// or not f32 on the CPU.
void save_npy(const std::string& path, const Tensor& t);

/// Loads an integer array ('<i8', or '<i4' widened) as row-major int64 values; when `shape` is
/// not null it receives the stored shape. Throws NpyError like load_npy (a float file names
/// load_npy).
std::vector<int64_t> load_npy_int(const std::string& path, Shape* shape = nullptr);

/// Saves int64 values as '<i8' with the given shape. Throws ShapeError when values.size() differs
/// from the shape's element count (or an extent is negative) and NpyError when the file cannot be
/// written.
void save_npy_int(const std::string& path, const std::vector<int64_t>& values, const Shape& shape);

}  // namespace tpsp::io
