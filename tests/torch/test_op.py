"""torch.ops.lmfuse.linear_cross_entropy from Python against
torch.nn.functional.cross_entropy(F.linear(...)) in fp64: the loss and the gradients of hidden, weight
and bias, for each option, on the CPU and (when there is one) on CUDA. Fresh random inputs each run.

    LMFUSE_TORCH_LIB=build/torch/liblmfuse_torch.so python3 -m pytest tests/torch/test_op.py
    (or: python3 tests/torch/test_op.py build/torch/liblmfuse_torch.so)
"""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

LIB = (sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1
       else os.environ.get("LMFUSE_TORCH_LIB", "build/torch/liblmfuse_torch.so"))
torch.ops.load_library(LIB)

D, V = 48, 97
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CASES = {
    "defaults": dict(),
    "ignore_index": dict(ignore_index=-1),
    "label_smoothing": dict(label_smoothing=0.1),
    "sum": dict(reduction="sum"),
    "none": dict(reduction="none"),
    "shift": dict(shift=True),
    "softcap": dict(softcap=3.0),
    "logit_scale": dict(logit_scale=0.25),
    "z_loss": dict(z_loss=1e-2),
    "n_items": dict(n_items=True),
}


def reference(h, w, b, labels, ignore_index=-100, label_smoothing=0.0, reduction="mean", shift=False,
              softcap=0.0, logit_scale=1.0, z_loss=0.0, n_items=None):
    logits = F.linear(h, w, b).reshape(-1, w.shape[0]) * logit_scale
    if softcap > 0:
        logits = softcap * torch.tanh(logits / softcap)
    labels = labels.long()
    if shift:
        shifted = torch.full_like(labels, ignore_index)
        shifted[..., :-1] = labels[..., 1:]
        labels = shifted
    labels = labels.reshape(-1)
    per_token = F.cross_entropy(logits, labels, ignore_index=ignore_index, label_smoothing=label_smoothing,
                                reduction="none")
    valid = (labels != ignore_index).double()
    if z_loss > 0:
        per_token = per_token + z_loss * torch.logsumexp(logits, -1).pow(2) * valid
    if reduction == "sum":
        return per_token.sum()
    if reduction == "none":
        return per_token.reshape(h.shape[:-1])
    divisor = n_items.double() if n_items is not None else valid.sum()
    return per_token.sum() / divisor


def relative_error(actual, expected):
    return ((actual.double() - expected).abs().max() / expected.abs().max().clamp_min(1e-3)).item()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("bias", [True, False])
def test_matches_fp64_reference(device, case, bias):
    options = dict(CASES[case])
    B, T = 3, 17
    h = torch.randn(B, T, D, device=device, requires_grad=True)
    w = (torch.randn(V, D, device=device) * 0.5).requires_grad_()
    b = torch.randn(V, device=device, requires_grad=True) if bias else None
    ignore = options.get("ignore_index", -100)
    labels = torch.randint(0, V, (B, T), device=device)
    labels[torch.rand(B, T, device=device) < 0.2] = ignore
    if options.pop("n_items", False):
        options["n_items"] = torch.tensor(40.0, device=device)

    loss = torch.ops.lmfuse.linear_cross_entropy(h, w, b, labels, **options)
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    b64 = b.detach().double().requires_grad_() if bias else None
    expected = reference(h64, w64, b64, labels, **options)
    assert loss.dtype == torch.float32 and loss.shape == expected.shape
    assert relative_error(loss, expected) < 1e-5

    upstream = torch.rand(loss.shape, device=device, dtype=torch.float64) + 0.5
    (loss * upstream.float()).sum().backward()
    (expected * upstream).sum().backward()
    assert relative_error(h.grad, h64.grad) < 1e-4
    assert relative_error(w.grad, w64.grad) < 1e-4
    if bias:
        assert relative_error(b.grad, b64.grad) < 1e-4


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["row-major", "column-major hidden", "column-major weight", "negative bit"])
def test_operands_and_gradient_layouts_as_linear_and_cross_entropy(device, layout):
    """What autograd hands a program is what F.linear + F.cross_entropy hand it: the loss of an operand with the
    negative bit as its values (not its memory), and each gradient's values, strides and view-ness (column-major
    for an operand the product reads column-major; a 2-D hidden's gradient a tensor of its own)."""
    N = 13
    hidden = (torch.randn(D, N, device=device).t() if layout == "column-major hidden"
              else torch.randn(N, D, device=device)).requires_grad_()
    weight = (torch.randn(D, V, device=device).t() * 0.5 if layout == "column-major weight"
              else torch.randn(V, D, device=device) * 0.5).requires_grad_()
    labels = torch.randint(0, V, (N,), device=device)
    def operand(t):
        return torch._neg_view(t) if layout == "negative bit" else t
    loss = torch.ops.lmfuse.linear_cross_entropy(operand(hidden), weight, None, labels)
    grads = torch.autograd.grad(loss, [hidden, weight])
    expected = F.cross_entropy(F.linear(operand(hidden), weight), labels)
    expected_grads = torch.autograd.grad(expected, [hidden, weight])
    assert relative_error(loss, expected.double()) < 1e-5
    for grad, expected_grad in zip(grads, expected_grads):
        assert relative_error(grad, expected_grad.double()) < 1e-4
        assert grad.stride() == expected_grad.stride()
        assert grad._is_view() == expected_grad._is_view()


@pytest.mark.parametrize("device", DEVICES)
def test_traced_from_python_the_operator_is_one_node_that_replays(device):
    """torch.jit.trace records the operator as one node (its body runs with the tracer's key excluded), so the
    traced function computes the loss for new inputs."""
    weight = torch.randn(V, D, device=device) * 0.5
    def loss_of(h, labels):
        return torch.ops.lmfuse.linear_cross_entropy(h, weight, None, labels)
    traced = torch.jit.trace(loss_of, (torch.randn(7, D, device=device), torch.randint(0, V, (7,), device=device)))
    assert "lmfuse::linear_cross_entropy" in str(traced.graph)
    h, labels = torch.randn(11, D, device=device) * 3, torch.randint(0, V, (11,), device=device)
    expected = F.cross_entropy(F.linear(h.double(), weight.double()), labels)
    assert relative_error(traced(h, labels), expected) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_and_no_grad(device):
    h = torch.randn(4, 9, D, device=device).bfloat16().requires_grad_()
    w = (torch.randn(V, D, device=device) * 0.5).bfloat16().requires_grad_()
    labels = torch.randint(0, V, (4, 9), device=device, dtype=torch.int32)
    loss = torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels)
    assert loss.dtype == F.linear(h, w).dtype
    loss.backward()
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    expected = reference(h64, w64, None, labels)
    expected.backward()
    assert relative_error(loss, expected) < 1e-2
    assert relative_error(h.grad, h64.grad) < 2e-2
    assert relative_error(w.grad, w64.grad) < 2e-2
    upcast = torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels, dtype=torch.float32)
    # bf16 operands: the CUDA backend's GEMMs round the logits to bf16, as F.linear in bf16 does.
    assert upcast.dtype == torch.float32 and relative_error(upcast, expected) < 1e-3
    with torch.no_grad():
        assert not torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels).requires_grad


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_label_check_inside_a_capture_is_an_error_naming_it(monkeypatch):
    """LMFUSE_CHECK_LABELS waits for the stream, which a captured stream must not: the call says so, and the
    capture ends cleanly (no crash, no invalidated stream left behind)."""
    h = torch.randn(64, D, device="cuda", requires_grad=True)
    w = torch.randn(V, D, device="cuda").requires_grad_()
    labels = torch.randint(0, V, (64,), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels).backward()
    torch.cuda.current_stream().wait_stream(side)
    monkeypatch.setenv("LMFUSE_CHECK_LABELS", "1")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="captured into a CUDA graph"):
        with torch.cuda.graph(graph):
            torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels)
    monkeypatch.delenv("LMFUSE_CHECK_LABELS")
    loss = torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels)  # the device still works
    torch.cuda.synchronize()
    assert torch.isfinite(loss).item()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_capture_and_replay():
    """Forward and backward captured in a CUDA graph, replayed on new data: no host synchronisation and
    no allocation outside the graph's pool may happen inside the call."""
    h = torch.randn(4, 64, D, device="cuda", requires_grad=True)
    w = (torch.randn(V, D, device="cuda") * 0.5).requires_grad_()
    labels = torch.randint(0, V, (4, 64), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch requires
        for _ in range(2):
            torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels, ignore_index=-1).backward()
            h.grad, w.grad = None, None
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = torch.ops.lmfuse.linear_cross_entropy(h, w, None, labels, ignore_index=-1)
        static_loss.backward()
    with torch.no_grad():
        h.copy_(torch.randn_like(h))
        labels.copy_(torch.randint(-1, V, labels.shape, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    expected = reference(h64, w64, None, labels, ignore_index=-1)
    expected.backward()
    assert relative_error(static_loss, expected) < 1e-5
    assert relative_error(h.grad, h64.grad) < 1e-4
    assert relative_error(w.grad, w64.grad) < 1e-4


def test_bad_reduction_is_named():
    h, w = torch.randn(2, D), torch.randn(V, D)
    with pytest.raises(RuntimeError, match="reduction"):
        torch.ops.lmfuse.linear_cross_entropy(h, w, None, torch.zeros(2, dtype=torch.long), reduction="avg")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.environ["LMFUSE_TORCH_LIB"] = sys.argv[1]
    sys.exit(pytest.main([__file__, "-q"]))
