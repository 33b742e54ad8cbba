// The agreement check of <lmfuse/distributed.h>: one all-gather of a small int64 signature per new
// configuration, after which every rank knows every rank's fields and throws the same error.
#pragma once

#include <lmfuse/distributed.h>

#include <functional>
#include <string>
#include <vector>

namespace lmfuse::distributed_detail {

struct Field {
  const char* name;
  int64_t value;
  bool same_on_every_rank = true;  ///< false: gathered for the caller (a shard's range), not compared
  bool is_double = false;          ///< value holds a double's bits (bitsOf), printed as the double
};

/// An int64 for a double option, bit for bit (two ranks agree exactly or not at all).
int64_t bitsOf(double value);

/// The fields every rank must agree on in a LossOptions (n_items and process_group only as "set or not").
std::vector<Field> optionFields(const LossOptions& options);

using Table = std::vector<std::vector<int64_t>>;  ///< values[rank][field]

/// Gathers every rank's fields and throws, on every rank alike, when a rank's arguments are invalid
/// (`localError` non-empty: this rank throws it, the others name the rank), when a field that must agree
/// differs, or when `validate` (run on the gathered table: a shard layout) throws. On CUDA tensors a
/// configuration that passed is not checked again on this group (the check reads the table on the host,
/// a synchronisation; the table it gave is returned) unless LMFUSE_CHECK_EVERY_CALL=1; on the CPU every
/// call is checked, so a rank that changes its configuration alone is always caught there.
Table checkAgreement(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const torch::Device& device,
                     const char* who, const std::vector<Field>& fields, const std::string& localError,
                     const std::function<void(const Table&)>& validate = {});

}  // namespace lmfuse::distributed_detail
