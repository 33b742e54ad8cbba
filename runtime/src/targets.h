// Which label a token is scored against, after the shift of flce.h: the token's own label, the next
// token's label within its row (ShiftKind::Rows) or within its packed segment (ShiftKind::Segments),
// or none. Host and device; never reads outside labels[0, tokens) or cu_seqlens[0, segments].
#pragma once

#include <cstdint>

#include "hd.h"
#include "lmfuse/flce.h"
#include "storage.h"

namespace lmfuse::detail {

constexpr int64_t kNoTarget = -1;

/// Segment k with cu_seqlens[k] ≤ token < cu_seqlens[k + 1] (empty segments are skipped), or -1.
LMFUSE_HD inline int64_t find_segment(const Shift& shift, int64_t token) {
  int64_t low = 0, high = shift.segments + 1;  // first index whose boundary exceeds token, in [0, S + 1]
  while (low < high) {
    int64_t middle = low + (high - low) / 2;
    if (load_index(shift.cu_seqlens, shift.cu_seqlens_type, middle) <= token) low = middle + 1;
    else high = middle;
  }
  int64_t segment = low - 1;
  if (segment < 0 || segment >= shift.segments) return -1;
  return segment;
}

/// Index in labels of the target of `token`, or kNoTarget.
LMFUSE_HD inline int64_t target_position(const Shift& shift, int64_t tokens, int64_t token) {
  switch (shift.kind) {
    case ShiftKind::None:
      return token;
    case ShiftKind::Rows:
      return (token + 1) % shift.seq_len == 0 ? kNoTarget : token + 1;
    case ShiftKind::Segments: {
      int64_t segment = find_segment(shift, token);
      if (segment < 0) return kNoTarget;
      int64_t end = load_index(shift.cu_seqlens, shift.cu_seqlens_type, segment + 1);
      // The bound on tokens keeps a malformed cu_seqlens (not validated on the device) in bounds.
      return token + 1 < end && token + 1 < tokens ? token + 1 : kNoTarget;
    }
  }
  return kNoTarget;
}

}  // namespace lmfuse::detail
