#!/usr/bin/env bash
# The per-file progress line and the colours of the site diagnostics appear when stderr is a terminal
# (script(1) gives the tool a pseudo-terminal) and never otherwise: a build log must not fill with them.
#   progress_on_terminal.sh <lmfuse> <stub include folder>
set -euo pipefail
lmfuse=$1 stubs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/model.cpp" <<'CPP'
#include <torch/torch.h>
namespace F = torch::nn::functional;
torch::Tensor loss_of(torch::nn::Linear &head, const torch::Tensor &h, const torch::Tensor &labels) {
  auto logits = head(h);
  return F::cross_entropy(logits.view({-1, 8}), labels.view(-1));
}
torch::Tensor refused(torch::nn::Linear &head, const torch::Tensor &h, const torch::Tensor &labels) {
  auto logits = head(h);
  logits = logits * 0.5;
  return F::cross_entropy(logits.view({-1, 8}), labels.view(-1));
}
CPP
command=("$lmfuse" --library-include "$stubs" "$work/model.cpp" -- -std=c++17 -I "$stubs")
on_terminal=$(TERM=xterm-256color script -qec "$(printf '%q ' "${command[@]}") 2>&1 >/dev/null" /dev/null)
grep -q 'lmfuse: \[1/1\] .*model.cpp' <<<"$on_terminal" || { echo "no progress line on a terminal:"; echo "$on_terminal"; exit 1; }
piped=$("${command[@]}" 2>&1 >/dev/null)
if grep -q 'lmfuse: \[1/1\]' <<<"$piped"; then echo "progress line printed to a pipe:"; echo "$piped"; exit 1; fi
grep -q $'\e\[[0-9;]*m.*warning: ' <<<"$on_terminal" || { echo "no coloured warning on a terminal:"; echo "$on_terminal"; exit 1; }
grep -q 'warning: ' <<<"$piped" || { echo "no warning in a pipe:"; echo "$piped"; exit 1; }
if grep -q $'\e\[' <<<"$piped"; then echo "colour escapes printed to a pipe:"; echo "$piped"; exit 1; fi
echo "progress line and colours: on a terminal only"
