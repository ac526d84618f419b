"""Loads what `gearbox export` wrote in Hugging Face's transformers and compares logits
(run by hand; the C tests need no Python):

    python3 check_export.py HF_DIR REFERENCE.safetensors   logits of GPT2LMHeadModel
        .from_pretrained(HF_DIR) on the reference's tokens against its logits
    python3 check_export.py HF_DIR LLMC.bin                 the same model, once from
        HF_DIR and once from an llm.c file (gearbox export --format llm.c), on random tokens
"""
import struct
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel


def from_llmc(path, like):
    """An HF model with the weights of llm.c's file, in llm.c's order."""
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    assert header[0] == 20240326 and header[1] == 3, header[:2]
    maxT, V, L, NH, C, Vp = header[2:8]
    model = GPT2LMHeadModel(like.config).eval()
    sd = model.state_dict()
    at = 0

    def take(n, shape):
        nonlocal at
        t = data[at:at + n].view(*shape)
        at += n
        return t

    sd["transformer.wte.weight"].copy_(take(Vp * C, (Vp, C))[:V])
    sd["transformer.wpe.weight"].copy_(take(maxT * C, (maxT, C)))
    kinds = [("ln_1.weight", (C,)), ("ln_1.bias", (C,)), ("attn.c_attn.weight", (3 * C, C)),
             ("attn.c_attn.bias", (3 * C,)), ("attn.c_proj.weight", (C, C)),
             ("attn.c_proj.bias", (C,)), ("ln_2.weight", (C,)), ("ln_2.bias", (C,)),
             ("mlp.c_fc.weight", (4 * C, C)), ("mlp.c_fc.bias", (4 * C,)),
             ("mlp.c_proj.weight", (C, 4 * C)), ("mlp.c_proj.bias", (C,))]
    for name, shape in kinds:
        for i in range(L):
            t = take(torch.Size(shape).numel(), shape)
            sd["transformer.h.%d.%s" % (i, name)].copy_(t.t() if len(shape) == 2 else t)
    sd["transformer.ln_f.weight"].copy_(take(C, (C,)))
    sd["transformer.ln_f.bias"].copy_(take(C, (C,)))
    assert at == data.numel()
    model.tie_weights()
    return model


def main():
    model = GPT2LMHeadModel.from_pretrained(sys.argv[1]).eval()
    print("loaded", sys.argv[1], "activation_function", model.config.activation_function)
    if sys.argv[2].endswith(".safetensors"):
        ref = load_file(sys.argv[2])
        tokens, want = ref["tokens"].long(), ref["logits"]
    else:
        tokens = torch.randint(0, model.config.vocab_size, (2, model.config.n_positions),
                               generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            want = from_llmc(sys.argv[2], model)(tokens).logits
    with torch.no_grad():
        got = model(tokens).logits
    print("logits max abs diff %.3g (largest %.3g)" % ((got - want).abs().max().item(),
                                                      want.abs().max().item()))


if __name__ == "__main__":
    main()
