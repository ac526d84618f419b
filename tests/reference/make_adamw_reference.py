"""Writes adamw.gbt: ten steps of torch.optim.AdamW on a small problem, for the optim tests.

Three tensors laid out in this order in the C test's flat buffer: weight (12, 20), which
decays, and bias (32) and gain (28), which do not (nanoGPT's grouping: matrices decay,
vectors do not). Each step takes fixed random gradients, clips them with
clip_grad_norm_ and applies AdamW with a warmup-then-decay learning rate. Gradient
magnitudes vary from step to step and max_norm is their median norm (between the middle two), so clipping is
active on some steps and not on others. There is no loss scaling.

Every hyperparameter is rounded to float32 first, so a C caller passing float values
runs exactly the mathematics recorded here.

Run from anywhere: /usr/bin/python3 tests/reference/make_adamw_reference.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gbt import write_gbt  # noqa: E402

STEPS = 10
SHAPES = {"weight": (12, 20), "bias": (32,), "gain": (28,)}
DECAY = {"weight": 1, "bias": 0, "gain": 0}


def f32(x):
    return float(torch.tensor(x, dtype=torch.float32))


def main():
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    init = {
        "weight": 0.1 * torch.randn(SHAPES["weight"]),
        "bias": 0.1 * torch.randn(SHAPES["bias"]),
        "gain": 1.0 + 0.1 * torch.randn(SHAPES["gain"]),
    }
    # Per-step scales spread the gradient norms around max_norm; the small bias scale
    # keeps some second moments near eps.
    step_scale = torch.exp(torch.empty(STEPS).uniform_(-1.5, 1.5))
    grads = {name: torch.stack([s * torch.randn(shape) for s in step_scale])
             for name, shape in SHAPES.items()}
    grads["bias"] *= 1e-3
    lr = [f32(1e-2 * min(s / 4, 1.0) * (1.0 - 0.05 * max(0, s - 4))) for s in range(1, STEPS + 1)]
    beta1, beta2, eps, weight_decay = f32(0.9), f32(0.95), f32(1e-8), f32(0.1)

    # Halfway between the two middle norms, so no step sits on the clipping threshold.
    norms = sorted(float(torch.cat([grads[n][s].flatten() for n in SHAPES]).norm())
                   for s in range(STEPS))
    max_norm = f32((norms[STEPS // 2 - 1] + norms[STEPS // 2]) / 2)

    params = {name: torch.nn.Parameter(t.clone()) for name, t in init.items()}
    opt = torch.optim.AdamW(
        [{"params": [params["weight"]], "weight_decay": weight_decay},
         {"params": [params["bias"], params["gain"]], "weight_decay": 0.0}],
        lr=lr[0], betas=(beta1, beta2), eps=eps)
    after = {name: [] for name in SHAPES}
    grad_norm = []
    for s in range(STEPS):
        for name, p in params.items():
            p.grad = grads[name][s].clone()
        grad_norm.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm)))
        for group in opt.param_groups:
            group["lr"] = lr[s]
        opt.step()
        for name, p in params.items():
            after[name].append(p.detach().clone())

    tensors = [
        ("hparams", torch.tensor([beta1, beta2, eps, weight_decay, max_norm])),
        ("lr", torch.tensor(lr)),
        ("decay", torch.tensor([DECAY[n] for n in SHAPES], dtype=torch.int32)),
        ("grad_norm", torch.tensor(grad_norm)),
    ]
    tensors += [(f"init.{n}", init[n]) for n in SHAPES]
    tensors += [(f"grads.{n}", grads[n]) for n in SHAPES]
    tensors += [(f"params.{n}", torch.stack(after[n])) for n in SHAPES]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adamw.gbt")
    write_gbt(out, tensors)
    clipped = int((torch.tensor(grad_norm) > max_norm).sum())
    print(f"wrote {out}: {STEPS} steps, max_norm {max_norm:.4g}, clipping active on "
          f"{clipped} of {STEPS} steps")


if __name__ == "__main__":
    main()
