"""Hand-written backward pass for stacks of dense layers (ReLU between) under cross-entropy.

The batched engine's hottest loop trains the MLP (and logistic regression) on
thousands of clients. Autograd records and replays a graph every minibatch step;
for these small per-client layers its bookkeeping and the extra tensors it keeps
cost about a fifth of a training step (measured by `python -m cfl_core bench`).
The gradients of a dense ReLU stack are short to write out, so these models
compute them directly: the same maths autograd does (softmax minus one-hot,
scaled by each sample's weight; ReLU passes gradient where its output is
positive), with layouts chosen by measurement. Other models and
losses keep autograd. Tests compare both on the same inputs.
"""
from __future__ import annotations

import torch


def dense_cross_entropy_grads(layers: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor,
                              y: torch.Tensor, valid: torch.Tensor,
                              accumulate: list[torch.Tensor] | None = None, beta: float = 0.0
                              ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Mean cross-entropy per copy and its gradients, for `layers` = [(weight [C, out, in], bias [C, out])].

    x [C, B, ...] is flattened per sample; y [C, B] class ids; valid [C, B] marks the
    samples that count (a copy's loss is the mean over its valid samples; none gives 0).
    Returns (loss [C], [d weight, d bias] per layer in order). With `accumulate` (contiguous
    tensors of those shapes) each gradient is added in place as beta * acc + gradient, the
    weight's inside its matmul (GEMM's beta): SGD's momentum update without another pass
    over the weights; the accumulators are returned.
    """
    weight = valid.to(x.dtype)
    weight = weight / weight.sum(-1, keepdim=True).clamp(min=1)  # [C, B]: 1/n for each valid sample
    last = len(layers) - 1
    # Hidden layers run sample-major ([C, B, features]: x W^T measured ~25% faster than W x^T
    # here); the last layer runs weight-major, so the logits come as [C, classes, B] and
    # log-softmax vectorises over the samples.
    inputs = []  # each layer's input, [C, B, in] (after the previous layer's ReLU)
    a = x.flatten(2)
    for i, (w, b) in enumerate(layers):
        inputs.append(a)
        if i < last:
            a = torch.baddbmm(b[:, None, :], a, w.transpose(1, 2))
            a.clamp_min_(0)  # ReLU in place: `a` is a fresh tensor nothing else holds
        else:
            a = torch.baddbmm(b[:, :, None], w, a.transpose(1, 2))
    log_p = torch.log_softmax(a, dim=1)
    target = y[:, None, :]
    loss = -(log_p.gather(1, target).squeeze(1) * weight).sum(-1)
    grad = log_p.exp_()  # softmax ...
    grad.scatter_add_(1, target, torch.full(target.shape, -1.0, dtype=grad.dtype, device=grad.device))
    grad.mul_(weight[:, None, :])  # ... minus one-hot, times each sample's weight: d loss / d logits
    grad = grad.transpose(1, 2)  # [C, B, classes], like every other layer's output gradient
    grads: list[torch.Tensor] = []
    for i in range(last, -1, -1):
        inp, grad_t = inputs[i], grad.transpose(1, 2)  # [C, B, in], [C, out, B]
        if accumulate is None:
            grads[:0] = [torch.bmm(grad_t, inp), grad.sum(1)]
        else:
            acc_w, acc_b = accumulate[2 * i], accumulate[2 * i + 1]
            acc_w.baddbmm_(grad_t, inp, beta=beta)
            acc_b.mul_(beta).add_(grad.sum(1))
            grads[:0] = [acc_w, acc_b]
        if i:
            grad = torch.bmm(grad, layers[i][0])  # [C, B, in]
            grad = torch.ops.aten.threshold_backward(grad, inp, 0)  # ReLU: zero where its output was 0
    return loss, grads
