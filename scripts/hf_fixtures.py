#!/usr/bin/env python3
"""Build the checkpoint-import fixtures: small random Hugging Face models and their reference logits.

Each fixture is a folder under crates/core/tests/fixtures/hf/<name>/ holding what `save_pretrained`
writes (config.json and model.safetensors, or shards with model.safetensors.index.json) plus
`reference.safetensors` with the tensors `ids` [T] (token ids as f32, exact) and `logits` [T, vocab]
(f32): the reference library's own forward pass, in float32, over those ids. The Rust tests
(crates/core/tests/hf_import.rs, crates/gpu/tests) import each folder and compare.

The models are built offline by transformers itself from a config (random weights, no hub access),
with every bias and norm parameter randomised so that a missing bias or a swapped layout shows. Some
fixtures rewrite config.json into the older key names that checkpoints on the hub still carry
(`rope_theta` / `rope_scaling`, `rotary_pct` / `rotary_emb_base`), which transformers 5 reads the same
way; the importer must accept both.

fla's GLA (`GLAForCausalLM`, package `flash-linear-attention`): the models are built and saved by
fla's own classes. fla's forward pass needs Triton kernels, which do not run on a CPU, so for the
reference logits `cpu_fla()` swaps exactly those for fla's naive torch op (`naive_recurrent_gla`, the
recurrence fla's own tests check its kernels against) and for plain torch formulas of RMSNorm, the
gated RMSNorm and SwiGLU; every other line that runs is fla's model code.

Regenerate (CI never runs this; it needs PyPI):
    python3 -m venv /tmp/hfenv && /tmp/hfenv/bin/pip install torch transformers safetensors flash-linear-attention
    /tmp/hfenv/bin/python scripts/hf_fixtures.py
Versions used for the committed fixtures are written to crates/core/tests/fixtures/hf/VERSIONS.

`--bench-models DIR` instead writes five random F16 models of the sizes the issue asks to measure
(SmolLM-135M, Pythia-160m, GPT-2 124M, a 768-wide BLOOM shape and a 12-layer fla GLA; ~0.2-0.3 GB
each, not committed),
for `attnlab bench --model DIR/<name>` (docs/bench.md).
"""
import json
import os
import pathlib
import shutil

import safetensors.torch
import torch
import transformers
from transformers import (BloomConfig, BloomForCausalLM, GPT2Config, GPT2LMHeadModel, GPTNeoXConfig,
                          GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM)

OUT = pathlib.Path(os.environ.get("HF_FIXTURES_OUT") or pathlib.Path(__file__).resolve().parent.parent / "crates/core/tests/fixtures/hf")
T = 24  # tokens per fixture


def randomise(model, seed):
    """Every parameter N(0, 0.2²) except norm weights 1 + N(0, 0.1²): biases and norms matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name or name.startswith("ln") or ".ln_" in name:
                p.copy_(1.0 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                p.copy_(0.2 * noise)


def legacy_rope_keys(cfg):
    """Write RoPE settings the way pre-5.0 checkpoints do."""
    rp = cfg.pop("rope_parameters", None) or {}
    kind = rp.pop("rope_type", "default")
    theta = rp.pop("rope_theta", 10000.0)
    if cfg["model_type"] == "gpt_neox":
        cfg["rotary_emb_base"] = theta
        cfg["rotary_pct"] = rp.pop("partial_rotary_factor", 1.0)
    else:
        cfg["rope_theta"] = theta
    if kind != "default":
        cfg["rope_scaling"] = {"rope_type": kind, **rp}
    return cfg


def cpu_fla():
    """fla's GLA classes with each Triton kernel they call replaced by a CPU equivalent (see above)."""
    import torch.nn.functional as F
    import fla.layers.gla as fla_gla
    import fla.modules.mlp as fla_mlp
    from fla.modules import FusedRMSNormGated, RMSNorm
    from fla.modules.activations import ACT2FN
    from fla.ops.gla.naive import naive_recurrent_gla

    def rms(x, weight, eps):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        return (y * weight.float() if weight is not None else y).to(x.dtype)

    def rms_forward(self, x, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None:
            x = x + residual
        y = rms(x, self.weight, self.eps)
        return (y, x) if prenorm else y

    def gated_forward(self, x, g, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None:
            x = x + residual
        y = rms(x, self.weight, self.eps) * F.silu(g)
        return (y, x) if prenorm else y

    def recurrent(q, k, v, gk, initial_state=None, output_final_state=False, **_):
        return naive_recurrent_gla(q, k, v, gk, initial_state, output_final_state)

    RMSNorm.forward = rms_forward
    FusedRMSNormGated.forward = gated_forward
    fla_gla.fused_recurrent_gla = recurrent
    fla_mlp.swiglu = lambda x, y: F.silu(x) * y
    fla_mlp.swiglu_linear = lambda x, y, w, b: F.linear(F.silu(x) * y, w, b)
    ACT2FN["swish"] = ACT2FN["silu"] = F.silu


def build(name, model_cls, config, seed, dtype=torch.float32, legacy=False, shard=None):
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    randomise(model, seed)
    if model.config.tie_word_embeddings:
        model.tie_weights()
    model = model.to(dtype)
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(folder, **kw)
    if legacy:
        path = folder / "config.json"
        path.write_text(json.dumps(legacy_rope_keys(json.loads(path.read_text())), indent=2) + "\n")
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, config.vocab_size, (1, T), generator=g)
    # The reference loads the saved folder in float32, as a user of the library would: the stored
    # (possibly F16/BF16) weights widened, every runtime table (RoPE frequencies) computed in f32.
    reference = model_cls.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = reference(ids).logits[0]
    safetensors.torch.save_file(
        {"ids": ids[0].to(torch.float32), "logits": logits.contiguous()},
        folder / "reference.safetensors",
        metadata={"transformers": transformers.__version__, "torch": torch.__version__},
    )
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, logits {tuple(logits.shape)}")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    small = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
    llama = dict(small, intermediate_size=48, max_position_embeddings=64, rms_norm_eps=1e-5)
    build("llama-gqa-untied", LlamaForCausalLM,
          LlamaConfig(**llama, num_key_value_heads=2, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 500.0}), 1, legacy=True)
    build("llama-mqa-bias-llama3-bf16", LlamaForCausalLM,
          LlamaConfig(**llama, num_key_value_heads=1, attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
                      rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 16}), 2, dtype=torch.bfloat16)
    build("llama-headdim-linear-f16-sharded", LlamaForCausalLM,
          LlamaConfig(**llama, num_key_value_heads=4, head_dim=16, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}), 3,
          dtype=torch.float16, shard="30KB")
    neox = dict(small, intermediate_size=64, max_position_embeddings=64, layer_norm_eps=1e-5)
    build("neox-partial-parallel", GPTNeoXForCausalLM,
          GPTNeoXConfig(**neox, use_parallel_residual=True, hidden_act="gelu", tie_word_embeddings=False,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                         "partial_rotary_factor": 0.25}), 4, legacy=True)
    build("neox-sequential-tanh-tied-nobias", GPTNeoXForCausalLM,
          GPTNeoXConfig(**neox, use_parallel_residual=False, hidden_act="gelu_new", attention_bias=False,
                        tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000.0,
                                         "partial_rotary_factor": 0.5}), 5)
    build("bloom-6-heads", BloomForCausalLM,
          BloomConfig(vocab_size=96, hidden_size=48, n_layer=2, n_head=6, layer_norm_epsilon=1e-5), 6)
    build("bloom-4-heads-f16", BloomForCausalLM,
          BloomConfig(vocab_size=96, hidden_size=32, n_layer=2, n_head=4, layer_norm_epsilon=1e-5), 7,
          dtype=torch.float16)
    build("gpt2", GPT2LMHeadModel,
          GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                     activation_function="gelu_new"), 8)
    build("gpt2-untied-inner", GPT2LMHeadModel,
          GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=2, n_positions=48, n_inner=40,
                     activation_function="gelu", tie_word_embeddings=False), 9)
    gla()
    import fla
    (OUT / "VERSIONS").write_text(
        f"torch {torch.__version__}\ntransformers {transformers.__version__}\nflash-linear-attention {fla.__version__}\n")


def gla():
    """fla GLA: keys half as wide as values with fused norms (fla's defaults), and GQA with unfused
    norms, full-width keys, values twice the model width and tied embeddings (BF16, F16)."""
    cpu_fla()
    from fla.models import GLAConfig, GLAForCausalLM
    small = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_heads=4, attn_mode="fused_recurrent")
    build("gla-narrow-keys-untied-bf16", GLAForCausalLM, GLAConfig(**small, expand_k=0.5, expand_v=1), 10,
          dtype=torch.bfloat16)
    build("gla-gqa-unfused-tied-f16", GLAForCausalLM,
          GLAConfig(**small, num_kv_heads=2, expand_k=1.0, expand_v=2, intermediate_size=48, fuse_norm=False,
                    fuse_swiglu=False, tie_word_embeddings=True, norm_eps=1e-5), 11, dtype=torch.float16)


def bench_models(out):
    """Random F16 checkpoints of 120-160M parameters (weights from each class's own init)."""
    models = {
        "smollm-135m-shape": LlamaForCausalLM(LlamaConfig(
            vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
            num_key_value_heads=3, tie_word_embeddings=True, max_position_embeddings=2048, rms_norm_eps=1e-5)),
        "pythia-160m-shape": GPTNeoXForCausalLM(GPTNeoXConfig(
            vocab_size=50304, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
            max_position_embeddings=2048,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})),
        "gpt2-124m-shape": GPT2LMHeadModel(GPT2Config()),
        "bloom-768-shape": BloomForCausalLM(BloomConfig(vocab_size=50304, hidden_size=768, n_layer=12, n_head=12)),
    }
    from fla.models import GLAConfig, GLAForCausalLM
    # fla-hub's gla-340M config at 12 layers: 4 heads, keys half as wide as values.
    models["gla-12l-768-shape"] = GLAForCausalLM(GLAConfig(
        vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_heads=4, expand_k=0.5, expand_v=1))
    for name, model in models.items():
        model.to(torch.float16).save_pretrained(pathlib.Path(out) / name)
        print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    import sys
    torch.manual_seed(0)
    if len(sys.argv) == 3 and sys.argv[1] == "--bench-models":
        bench_models(sys.argv[2])
    else:
        main()
