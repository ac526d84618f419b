"""Writes the fixtures of tests/weights: a small random GPT-2 made with Hugging Face's
transformers, in the files gearbox imports, and PyTorch's logits for it.

    python3 make_fixtures.py OUTDIR     (tests/weights/fixtures; torch, transformers,
                                         safetensors; CPU only, seeded)

OUTDIR/gpt2_tiny/            model.safetensors + config.json as GPT2LMHeadModel.save_pretrained
                             writes them ("transformer." names, no lm_head: tied)
OUTDIR/gpt2_tiny_bare/       the same weights rounded to bf16, named without "transformer.",
                             with the attention mask buffers (h.N.attn.bias) as the model hub's
                             gpt2 file has them
OUTDIR/gpt2_tiny_llmc.bin    llm.c's layout (train_gpt2.py's write_model, version 3, f32),
                             the vocabulary padded to a multiple of 64
OUTDIR/reference.safetensors tokens and targets (B, T) as F32, the logits (B, T, V) of
                             model(tokens) and the mean cross-entropy against the targets
OUTDIR/gpt2_tiny_erf/        the same weights (a link to gpt2_tiny's file) with
                             activation_function "gelu", GELU's exact form, and
OUTDIR/reference_erf.safetensors its logits and loss on the same tokens
The parameters are drawn at random (LayerNorms and biases too), so every tensor matters.
"""
import os
import struct
import sys

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

N_LAYER, N_HEAD, N_EMBD, BLOCK, VOCAB = 2, 4, 64, 32, 200
PADDED_VOCAB = 256  # llm.c pads to a multiple; 50257 -> 50304 for GPT-2 itself
B = 2


def make_model():
    torch.manual_seed(1234)
    config = GPT2Config(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, n_positions=BLOCK,
                        vocab_size=VOCAB, activation_function="gelu_new", resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "transformer.ln_f.weight":
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    return model


def params_without_buffers(model):
    return {k: v.contiguous() for k, v in model.state_dict().items()
            if not k.endswith(".attn.bias") and not k.endswith(".attn.masked_bias") and k != "lm_head.weight"}


def write_bare(model, out):
    """No "transformer.", bf16, the causal mask buffers included."""
    os.makedirs(out, exist_ok=True)
    tensors = {}
    for k, v in params_without_buffers(model).items():
        tensors[k[len("transformer."):]] = v.to(torch.bfloat16)
    for layer in range(N_LAYER):
        mask = torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK)
        tensors["h.%d.attn.bias" % layer] = mask
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    model.config.to_json_file(os.path.join(out, "config.json"))


def write_llmc(model, path):
    """llm.c's train_gpt2.py write_model: header of 256 int32, then the parameters in its
    order, Linear weights (out, in) as nanoGPT keeps them (HF's Conv1D transposed)."""
    sd = params_without_buffers(model)
    L = N_LAYER
    header = [20240326, 3, BLOCK, VOCAB, L, N_HEAD, N_EMBD, PADDED_VOCAB] + [0] * 248
    wte = torch.zeros(PADDED_VOCAB, N_EMBD)
    wte[:VOCAB] = sd["transformer.wte.weight"]
    conv = ("c_attn.weight", "c_proj.weight", "c_fc.weight")

    def layer(name):
        key = "transformer.h.%d." + name
        return [sd[key % i].t() if name.endswith(conv) else sd[key % i] for i in range(L)]

    tensors = [wte, sd["transformer.wpe.weight"]]
    for name in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"):
        tensors += layer(name)
    tensors += [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for t in tensors:
            f.write(t.contiguous().to(torch.float32).numpy().tobytes())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures")
    model = make_model()
    model.save_pretrained(os.path.join(out, "gpt2_tiny"), safe_serialization=True)
    gen = os.path.join(out, "gpt2_tiny", "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    write_bare(model, os.path.join(out, "gpt2_tiny_bare"))
    write_llmc(model, os.path.join(out, "gpt2_tiny_llmc.bin"))
    g = torch.Generator().manual_seed(99)
    tokens = torch.randint(0, VOCAB, (B, BLOCK), generator=g)
    targets = torch.randint(0, VOCAB, (B, BLOCK), generator=g)
    write_reference(model, tokens, targets, os.path.join(out, "reference.safetensors"))
    erf = os.path.join(out, "gpt2_tiny_erf")
    os.makedirs(erf, exist_ok=True)
    link = os.path.join(erf, "model.safetensors")
    if not os.path.lexists(link):
        os.symlink(os.path.join("..", "gpt2_tiny", "model.safetensors"), link)
    model.config.activation_function = "gelu"
    model.config.to_json_file(os.path.join(erf, "config.json"))
    erf_model = GPT2LMHeadModel(model.config).eval()
    erf_model.load_state_dict(model.state_dict())
    write_reference(erf_model, tokens, targets, os.path.join(out, "reference_erf.safetensors"))


def write_reference(model, tokens, targets, path):
    with torch.no_grad():
        logits = model(tokens).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    save_file({"tokens": tokens.float(), "targets": targets.float(), "logits": logits.contiguous(),
               "loss": loss.view(1)}, path)
    print(path, "loss", loss.item())


if __name__ == "__main__":
    main()
