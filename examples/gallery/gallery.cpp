// The refusal gallery: one model per reason lmfuse leaves a loss site alone, plus one accepted and one
// suppressed site. Each models/<status-or-reason>.h holds exactly one site, and the name of the file is
// the audit entry it must produce (tests/torch checks that; README.md shows the audit). One translation
// unit, so the tool parses LibTorch's headers once.
#include "models/head-not-linear.h"
#include "models/head-wrapped.h"
#include "models/in-macro.h"
#include "models/labels-branch-nontrivial.h"
#include "models/labels-mismatch.h"
#include "models/logits-indexed.h"
#include "models/logits-rebound.h"
#include "models/logits-softcapped.h"
#include "models/logits-used-elsewhere.h"
#include "models/loss-unsupported.h"
#include "models/patched.h"
#include "models/suppressed.h"
