// The agreement check of <lmfuse/distributed.h>: one all-gather of a small int64 signature per new
// configuration, after which every rank knows every rank's fields and throws the same error.
#pragma once

#include <lmfuse/distributed.h>

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

/// The gathered values: values[rank][field]. Skips the collective (and returns the table it gave then)
/// when the same fields already passed on this group. `localError` non-empty: this rank's arguments are invalid;
/// every rank throws (this one with `localError`).
std::vector<std::vector<int64_t>> checkAgreement(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                                 const torch::Device& device, const char* who,
                                                 const std::vector<Field>& fields, const std::string& localError);

}  // namespace lmfuse::distributed_detail
