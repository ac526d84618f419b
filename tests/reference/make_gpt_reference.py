"""Writes gpt_tiny.gbt and gpt_tiny_bias.gbt: a tiny nanoGPT-style GPT, for the core's
end-to-end test.

The model is written out functionally, as the C core computes it: token plus position
embedding; L pre-LayerNorm blocks of causal self-attention (c_attn splits q, k, v in that
order along its output; heads are view(B, T, H, D).transpose(1, 2)) and an MLP with the
exact erf GELU, each added to the residual; a final LayerNorm; an LM head tied to the
token embedding; mean cross-entropy. LayerNorm eps is 1e-5 and it has a bias only when
the linear layers do.

Initialisation is not GPT-2's: matrices are normal(0, 0.02), but LayerNorm weights are
1 + 0.1*normal and biases 0.1*normal, so a LayerNorm or bias wired to the wrong place
changes the numbers instead of hiding behind ones and zeros.

Each file holds the step-0 forward and backward (logits, loss, gradients, their global
norm) and the parameters after three training steps on the same batch: zero gradients,
forward, backward, clip_grad_norm_(max_norm) with max_norm half the first step's norm
(so clipping is active), AdamW with decay on 2-D parameters only (nanoGPT's grouping)
and a warmup learning rate. Hyperparameters are rounded to float32 first, so a C caller
passing float values runs exactly the mathematics recorded here. Float32 on the CPU,
one thread, deterministic algorithms.

Run from anywhere: /usr/bin/python3 tests/reference/make_gpt_reference.py
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gbt import write_gbt  # noqa: E402

L, H, C, T, B, V = 2, 2, 32, 16, 4, 65
LN_EPS = 1e-5
LRS = (1e-3, 2e-3, 3e-3)
BETA1, BETA2, EPS, WEIGHT_DECAY = 0.9, 0.99, 1e-8, 0.1


def f32(x):
    return float(torch.tensor(float(x), dtype=torch.float32))


def param_shapes(bias):
    """(name, shape) of every parameter, in the file's order; names drop the "param." prefix."""
    def block(l):
        p = f"h.{l}."
        entries = [
            (p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
            (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
            (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
            (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
            (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
            (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,)),
        ]
        return [e for e in entries if bias or not e[0].endswith(".bias")]

    shapes = [("wte", (V, C)), ("wpe", (T, C))]
    for l in range(L):
        shapes += block(l)
    shapes.append(("ln_f.weight", (C,)))
    if bias:
        shapes.append(("ln_f.bias", (C,)))
    return shapes


def init_param(name, shape):
    if len(shape) == 2:
        return 0.02 * torch.randn(shape)
    if name.endswith(".weight"):          # a LayerNorm gain
        return 1.0 + 0.1 * torch.randn(shape)
    return 0.1 * torch.randn(shape)       # a bias


def layer_norm(x, P, prefix):
    return F.layer_norm(x, (C,), P[prefix + ".weight"], P.get(prefix + ".bias"), LN_EPS)


def linear(x, P, prefix):
    return F.linear(x, P[prefix + ".weight"], P.get(prefix + ".bias"))


def attention(x, P, prefix):  # x (B, T, C)
    D = C // H
    q, k, v = linear(x, P, prefix + ".c_attn").split(C, dim=2)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    return linear(y, P, prefix + ".c_proj")


def forward(P, tokens, targets):  # tokens, targets (B, T)
    x = P["wte"][tokens.long()] + P["wpe"][:T]
    for l in range(L):
        h = f"h.{l}"
        x = x + attention(layer_norm(x, P, h + ".ln_1"), P, h + ".attn")
        m = F.gelu(linear(layer_norm(x, P, h + ".ln_2"), P, h + ".mlp.c_fc"))
        x = x + linear(m, P, h + ".mlp.c_proj")
    logits = layer_norm(x, P, "ln_f") @ P["wte"].t()  # (B, T, V)
    loss = F.cross_entropy(logits.view(-1, V), targets.long().view(-1))
    return logits, loss


def global_norm(grads):
    """The total norm exactly as clip_grad_norm_ computes it."""
    return torch.norm(torch.stack([torch.norm(g) for g in grads]))


def make(bias, path):
    torch.manual_seed(1337)
    shapes = param_shapes(bias)
    P = {name: init_param(name, shape).requires_grad_() for name, shape in shapes}
    init = {name: p.detach().clone() for name, p in P.items()}
    tokens = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), dtype=torch.int32)

    lrs = [f32(lr) for lr in LRS]
    beta1, beta2, eps, weight_decay = (f32(x) for x in (BETA1, BETA2, EPS, WEIGHT_DECAY))
    params = list(P.values())
    opt = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=lrs[0], betas=(beta1, beta2), eps=eps)

    for step, lr in enumerate(lrs):
        opt.zero_grad(set_to_none=True)
        logits, loss = forward(P, tokens, targets)
        loss.backward()
        if step == 0:
            first = (logits.detach().clone(), loss.detach().clone(),
                     {name: p.grad.clone() for name, p in P.items()})
            grad_norm = float(global_norm([p.grad for p in params]))
            max_norm = f32(grad_norm / 2)
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()

    logits0, loss0, grads0 = first
    config = [L, H, C, T, B, V, int(bias)]
    names = [name for name, _ in shapes]
    tensors = [(f"param.{n}", init[n]) for n in names]
    tensors += [
        ("config", torch.tensor(config, dtype=torch.int32)),
        ("tokens", tokens),
        ("targets", targets),
        ("logits", logits0),
        ("loss", loss0.reshape(1)),
    ]
    tensors += [(f"grad.{n}", grads0[n]) for n in names]
    tensors += [
        ("hparams", torch.tensor(lrs + [beta1, beta2, eps, weight_decay, max_norm])),
        ("grad_norm", torch.tensor([grad_norm])),
    ]
    tensors += [(f"step3.{n}", P[n].detach().clone()) for n in names]
    write_gbt(path, tensors)
    n_params = sum(t.numel() for t in init.values())
    print(f"wrote {path}: {n_params} parameters, loss {float(loss0):.6f}, "
          f"grad norm {grad_norm:.6f}, max_norm {max_norm:.6f}")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    here = os.path.dirname(os.path.abspath(__file__))
    make(False, os.path.join(here, "gpt_tiny.gbt"))
    make(True, os.path.join(here, "gpt_tiny_bias.gbt"))


if __name__ == "__main__":
    main()
