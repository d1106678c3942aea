//! The five architectures: each reads its config fields (with the defaults of its transformers
//! config class), refuses what it cannot map, and renames, splits, transposes and permutes its
//! tensors into attnlab's names (docs/model-format.md §7 has the table).

use super::{HfConfig, ImportOptions, TensorStore};
use crate::config::{
    AbsolutePosition, AttentionSpec, Biases, FfnConfig, FfnKind, ModelConfig, NormConfig, NormKind,
    FORMAT_VERSION,
};
use crate::error::{Error, Result};
use crate::variants::{alibi::Alibi, gla::Gla, nope::Nope, rope::Rope};
use crate::weights::Tensor;
use std::collections::BTreeMap;

/// Converted tensors by attnlab name.
type Tensors = BTreeMap<String, Tensor>;

/// Default context for architectures without a position limit (ALiBi).
const DEFAULT_UNBOUNDED_CONTEXT: usize = 8192;

pub(super) fn convert(
    arch: &str,
    c: &HfConfig,
    s: &mut TensorStore,
    opts: ImportOptions,
) -> Result<(ModelConfig, Tensors)> {
    let mut out = Out { t: BTreeMap::new(), s };
    let mut cfg = match arch {
        "LlamaForCausalLM" => llama(c, &mut out, opts)?,
        "GPTNeoXForCausalLM" => neox(c, &mut out, opts)?,
        "BloomForCausalLM" => bloom(c, &mut out, opts)?,
        "GLAForCausalLM" => gla(c, &mut out, opts)?,
        _ => gpt2(c, &mut out, opts)?,
    };
    // One attention spec per layer, made only now that every layer's tensors were found: an absurd
    // layer count fails on a missing tensor, never on this allocation.
    cfg.layers = cfg.layers.first().map_or_else(Vec::new, |spec| vec![spec.clone(); cfg.n_layers]);
    Ok((cfg, out.t))
}

/// Sizes every architecture has.
struct Dims {
    vocab: usize,
    d: usize,
    layers: usize,
    heads: usize,
    kv: usize,
    dh: usize,
    hidden: usize,
}

/// An attnlab config with `dims`, the attention spec of every layer (`layers` holds it once until
/// [`convert`] repeats it), and the common defaults (LayerNorm, untied, sequential residual, no
/// biases) that each architecture then overrides.
///
/// Sizes come from the config unchecked until the tensors are compared with them, so products of
/// sizes saturate: an absurd size yields a shape no tensor has, never an overflow.
fn base(
    arch: &str,
    c: &HfConfig,
    d: &Dims,
    layer: AttentionSpec,
    eps: f64,
    context: (usize, usize),
) -> Result<ModelConfig> {
    Ok(ModelConfig {
        format_version: FORMAT_VERSION,
        name: c.str_or("_name_or_path", "")?,
        description: format!("imported from a Hugging Face {arch} checkpoint"),
        vocab_size: d.vocab,
        d_model: d.d,
        n_layers: d.layers,
        n_heads: d.heads,
        n_kv_heads: (d.kv != d.heads).then_some(d.kv),
        head_dim: d.dh,
        qk_head_dim: None,
        ffn: FfnConfig { kind: FfnKind::Gelu, hidden: d.hidden },
        norm: NormConfig { kind: NormKind::Layernorm, eps },
        tie_embeddings: false,
        train_context: context.0.min(context.1),
        max_context: context.1,
        absolute_position: AbsolutePosition::None,
        biases: Biases::default(),
        parallel_residual: false,
        embedding_norm: false,
        scale_embeddings: false,
        layers: vec![layer],
    })
}

/// `head_dim` when the config gives it (Llama may set it freely), else `hidden / heads`, refused when
/// that does not divide (`heads_keys`: the aliases of the head count).
fn head_dim(c: &HfConfig, d: usize, heads: usize, heads_keys: &[&str]) -> Result<usize> {
    if let Some(dh) = c.opt_usize(&["head_dim"])? {
        return Ok(dh);
    }
    match d.is_multiple_of(heads) {
        true => Ok(d / heads),
        false => {
            Err(HfConfig::err(&c.key_of(heads_keys), format!("{heads} does not divide hidden_size {d}")))
        }
    }
}

/// The GELU of an activation name: exact erf form or one of the tanh approximations.
fn gelu_kind(act: &str, key: &str, arch: &str) -> Result<FfnKind> {
    match act {
        "gelu" => Ok(FfnKind::GeluExact),
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(FfnKind::Gelu),
        other => Err(Error::Unsupported(format!(
            "{key} {other} is not supported for {arch} (supported: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)"
        ))),
    }
}

/// The RoPE settings and the base config of a RoPE architecture (Llama, NeoX): context limit
/// `max_position_embeddings` (2048 when absent) unless `--max-context` says otherwise.
fn rope_config(
    arch: &str,
    c: &HfConfig,
    d: &Dims,
    opts: ImportOptions,
    eps: f64,
) -> Result<(Rope, ModelConfig)> {
    let rope = c.rope(d.dh)?;
    let native = c.opt_usize(&["max_position_embeddings"])?.unwrap_or(2048);
    let context = (native, opts.max_context.unwrap_or(native));
    let cfg = base(arch, c, d, AttentionSpec::Rope(rope.clone()), eps, context)?;
    Ok((rope, cfg))
}

fn llama(c: &HfConfig, o: &mut Out, opts: ImportOptions) -> Result<ModelConfig> {
    let arch = "LlamaForCausalLM";
    let act = c.str_or("hidden_act", "silu")?;
    if act != "silu" {
        return Err(Error::Unsupported(format!("hidden_act {act} is not supported for {arch} (only silu)")));
    }
    let (d, heads) = (c.usize(&["hidden_size"])?, c.usize(&["num_attention_heads"])?);
    let dims = Dims {
        vocab: c.usize(&["vocab_size"])?,
        d,
        layers: c.usize(&["num_hidden_layers"])?,
        heads,
        kv: c.opt_usize(&["num_key_value_heads"])?.unwrap_or(heads),
        dh: head_dim(c, d, heads, &["num_attention_heads"])?,
        hidden: c.usize(&["intermediate_size"])?,
    };
    let (rope, mut cfg) = rope_config(arch, c, &dims, opts, c.eps_or("rms_norm_eps", 1e-6)?)?;
    (cfg.norm.kind, cfg.ffn.kind) = (NormKind::Rmsnorm, FfnKind::Swiglu);
    let attn_bias = c.bool_or("attention_bias", false)?;
    cfg.biases = Biases { qkv: attn_bias, attn_out: attn_bias, ffn: c.bool_or("mlp_bias", false)? };
    cfg.tie_embeddings = c.bool_or("tie_word_embeddings", false)?;
    o.embeddings("model.embed_tokens.weight", "model.norm", "lm_head.weight", &cfg)?;
    let (a, kvd, b) = (dims.heads.saturating_mul(dims.dh), dims.kv.saturating_mul(dims.dh), cfg.biases);
    for i in 0..dims.layers {
        let (p, q) = (format!("model.layers.{i}."), format!("layers.{i}."));
        o.norm(&format!("{p}input_layernorm"), &format!("{q}attn_norm"), &cfg)?;
        o.norm(&format!("{p}post_attention_layernorm"), &format!("{q}ffn_norm"), &cfg)?;
        // (checkpoint name, our weight and bias, shape, RoPE heads to permute, has a bias)
        for (hf, w, bn, shape, rot, bias) in [
            ("self_attn.q_proj", "attn.wq", "attn.bq", [a, d], Some(dims.heads), b.qkv),
            ("self_attn.k_proj", "attn.wk", "attn.bk", [kvd, d], Some(dims.kv), b.qkv),
            ("self_attn.v_proj", "attn.wv", "attn.bv", [kvd, d], None, b.qkv),
            ("self_attn.o_proj", "attn.wo", "attn.bo", [d, a], None, b.attn_out),
            ("mlp.gate_proj", "ffn.w_gate", "ffn.b_gate", [dims.hidden, d], None, b.ffn),
            ("mlp.up_proj", "ffn.w_up", "ffn.b_up", [dims.hidden, d], None, b.ffn),
            ("mlp.down_proj", "ffn.w_down", "ffn.b_down", [d, dims.hidden], None, b.ffn),
        ] {
            let permute = |x: Vec<f32>, row| match rot {
                Some(h) => rotate_half_to_pairs(x, h, dims.dh, &rope, row),
                None => x,
            };
            let weight = o.s.take(&format!("{p}{hf}.weight"), &shape)?;
            o.put(format!("{q}{w}"), &shape, permute(weight, shape[1]));
            if bias {
                let bv = o.s.take(&format!("{p}{hf}.bias"), &[shape[0]])?;
                o.put(format!("{q}{bn}"), &[shape[0]], permute(bv, 1));
            }
        }
    }
    Ok(cfg)
}

fn neox(c: &HfConfig, o: &mut Out, opts: ImportOptions) -> Result<ModelConfig> {
    let arch = "GPTNeoXForCausalLM";
    let (d, heads) = (c.usize(&["hidden_size"])?, c.usize(&["num_attention_heads"])?);
    let dims = Dims {
        vocab: c.usize(&["vocab_size"])?,
        d,
        layers: c.usize(&["num_hidden_layers"])?,
        heads,
        kv: heads,
        dh: head_dim(c, d, heads, &["num_attention_heads"])?,
        hidden: c.usize(&["intermediate_size"])?,
    };
    let (rope, mut cfg) = rope_config(arch, c, &dims, opts, c.eps_or("layer_norm_eps", 1e-5)?)?;
    cfg.ffn.kind = gelu_kind(&c.str_or("hidden_act", "gelu")?, "hidden_act", arch)?;
    let attn_bias = c.bool_or("attention_bias", true)?;
    cfg.biases = Biases { qkv: attn_bias, attn_out: attn_bias, ffn: true };
    cfg.parallel_residual = c.bool_or("use_parallel_residual", true)?;
    cfg.tie_embeddings = c.bool_or("tie_word_embeddings", false)?;
    o.embeddings("gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm", "embed_out.weight", &cfg)?;
    for i in 0..dims.layers {
        o.fused_block(&format!("gpt_neox.layers.{i}."), "attention", i, &dims, &cfg, Some(&rope))?;
    }
    Ok(cfg)
}

/// Sizes of the GPT-2-era configs (BLOOM, GPT-2): `n_head`, `n_layer`, the width under `d_keys`,
/// no GQA, and the FFN width `hidden(d)`.
fn gpt_dims(c: &HfConfig, d_keys: &[&str], hidden: impl FnOnce(usize) -> Result<usize>) -> Result<Dims> {
    let (d, heads) = (c.usize(d_keys)?, c.usize(&["n_head", "num_attention_heads"])?);
    Ok(Dims {
        vocab: c.usize(&["vocab_size"])?,
        d,
        layers: c.usize(&["n_layer", "num_hidden_layers"])?,
        heads,
        kv: heads,
        dh: head_dim(c, d, heads, &["n_head", "num_attention_heads"])?,
        hidden: hidden(d)?,
    })
}

fn bloom(c: &HfConfig, o: &mut Out, opts: ImportOptions) -> Result<ModelConfig> {
    let arch = "BloomForCausalLM";
    c.refuse_if("apply_residual_connection_post_layernorm", true, arch)?;
    let dims = gpt_dims(c, &["hidden_size", "n_embed"], |d| Ok(d.saturating_mul(4)))?;
    let native = c.opt_usize(&["seq_length"])?.unwrap_or(2048);
    let max = opts.max_context.unwrap_or(DEFAULT_UNBOUNDED_CONTEXT);
    let eps = c.eps_or("layer_norm_epsilon", 1e-5)?;
    // BLOOM's `build_alibi_tensor` uses the ALiBi paper's slopes (Press et al., §3), our default.
    let mut cfg = base(arch, c, &dims, AttentionSpec::Alibi(Alibi { slopes: None }), eps, (native, max))?;
    cfg.biases = Biases { qkv: true, attn_out: true, ffn: true };
    (cfg.embedding_norm, cfg.tie_embeddings) = (true, c.bool_or("tie_word_embeddings", true)?);
    let p0 = if o.s.has("transformer.word_embeddings.weight") { "transformer." } else { "" };
    o.embeddings(&format!("{p0}word_embeddings.weight"), &format!("{p0}ln_f"), "lm_head.weight", &cfg)?;
    o.norm(&format!("{p0}word_embeddings_layernorm"), "emb_norm", &cfg)?;
    for i in 0..dims.layers {
        o.fused_block(&format!("{p0}h.{i}."), "self_attention", i, &dims, &cfg, None)?;
    }
    Ok(cfg)
}

fn gpt2(c: &HfConfig, o: &mut Out, opts: ImportOptions) -> Result<ModelConfig> {
    let arch = "GPT2LMHeadModel";
    c.refuse_if("scale_attn_by_inverse_layer_idx", true, arch)?;
    c.refuse_if("scale_attn_weights", false, arch)?;
    c.refuse_if("add_cross_attention", true, arch)?;
    let dims = gpt_dims(c, &["n_embd", "hidden_size"], |d| {
        Ok(c.opt_usize(&["n_inner"])?.unwrap_or(d.saturating_mul(4)))
    })?;
    let d = dims.d;
    let positions = c.usize(&["n_positions", "max_position_embeddings"])?;
    let eps = c.eps_or("layer_norm_epsilon", 1e-5)?;
    // Learned positions end at n_positions: a longer max_context has no rows to read.
    let max = opts.max_context.unwrap_or(positions).min(positions);
    let mut cfg = base(arch, c, &dims, AttentionSpec::Nope(Nope {}), eps, (positions, max))?;
    cfg.ffn.kind = gelu_kind(&c.str_or("activation_function", "gelu_new")?, "activation_function", arch)?;
    cfg.biases = Biases { qkv: true, attn_out: true, ffn: true };
    (cfg.absolute_position, cfg.tie_embeddings) =
        (AbsolutePosition::Learned, c.bool_or("tie_word_embeddings", true)?);
    let p0 = if o.s.has("transformer.wte.weight") { "transformer." } else { "" };
    o.embeddings(&format!("{p0}wte.weight"), &format!("{p0}ln_f"), "lm_head.weight", &cfg)?;
    let wpe = o.s.take(&format!("{p0}wpe.weight"), &[positions, d])?;
    o.put("pos_emb.weight".into(), &[max, d], wpe[..max * d].to_vec());
    for i in 0..dims.layers {
        let (p, q) = (format!("{p0}h.{i}."), format!("layers.{i}."));
        o.norm(&format!("{p}ln_1"), &format!("{q}attn_norm"), &cfg)?;
        o.norm(&format!("{p}ln_2"), &format!("{q}ffn_norm"), &cfg)?;
        // Conv1D stores [in, out]: transpose, then q | k | v are consecutive row blocks.
        let d3 = d.saturating_mul(3);
        let w = transpose(&o.s.take(&format!("{p}attn.c_attn.weight"), &[d, d3])?, d, d3);
        let b = o.s.take(&format!("{p}attn.c_attn.bias"), &[d3])?;
        for (k, name) in ["q", "k", "v"].iter().enumerate() {
            o.put(format!("{q}attn.w{name}"), &[d, d], w[k * d * d..(k + 1) * d * d].to_vec());
            o.put(format!("{q}attn.b{name}"), &[d], b[k * d..(k + 1) * d].to_vec());
        }
        for (hf, w, bn, shape) in [
            ("attn.c_proj", "attn.wo", "attn.bo", [d, d]),
            ("mlp.c_fc", "ffn.w_up", "ffn.b_up", [dims.hidden, d]),
            ("mlp.c_proj", "ffn.w_down", "ffn.b_down", [d, dims.hidden]),
        ] {
            let weight = o.s.take(&format!("{p}{hf}.weight"), &[shape[1], shape[0]])?;
            o.put(format!("{q}{w}"), &shape, transpose(&weight, shape[1], shape[0]));
            let b = o.s.take(&format!("{p}{hf}.bias"), &[shape[0]])?;
            o.put(format!("{q}{bn}"), &[shape[0]], b);
        }
    }
    Ok(cfg)
}

/// fla's `GLAForCausalLM` (fla/models/gla, fla/layers/gla.py): RMSNorm pre-norm blocks of gated
/// linear attention (identity features, keys `expand_k·d` and values `expand_v·d` wide, the
/// low-rank gate `gk_proj` with fla's fixed rank 16 and normalizer 16, per-head RMSNorm times
/// swish(`g_proj`)) and a SwiGLU MLP. Short convolutions, hybrid softmax layers, feature maps,
/// gate clamping and configs without the output gate change the math and are refused.
fn gla(c: &HfConfig, o: &mut Out, opts: ImportOptions) -> Result<ModelConfig> {
    let arch = "GLAForCausalLM";
    c.refuse_if("use_short_conv", true, arch)?;
    c.refuse_if("use_output_gate", false, arch)?;
    c.refuse_if("elementwise_affine", false, arch)?;
    c.refuse_set("attn", "hybrid softmax attention layers", arch)?;
    c.refuse_set("feature_map", "a feature map on q and k", arch)?;
    c.refuse_set("clamp_min", "a clamped gate", arch)?;
    c.refuse_set("attnres_block_size", "block attention residuals", arch)?;
    let act = c.str_or("hidden_act", "swish")?;
    if act != "swish" && act != "silu" {
        return Err(Error::Unsupported(format!("hidden_act {act} is not supported for {arch} (only swish)")));
    }
    let (dims, qk) = gla_dims(c)?;
    let eps = c.eps_or("norm_eps", 1e-6)?;
    let layer = AttentionSpec::Gla(Gla {
        gate_rank: GLA_GATE_RANK,
        gate_logit_normalizer: 16.0,
        head_norm_eps: Some(eps),
    });
    let native = c.opt_usize(&["max_position_embeddings"])?.unwrap_or(2048);
    let context = (native, opts.max_context.unwrap_or(DEFAULT_UNBOUNDED_CONTEXT));
    let mut cfg = base(arch, c, &dims, layer, eps, context)?;
    (cfg.norm.kind, cfg.ffn.kind) = (NormKind::Rmsnorm, FfnKind::Swiglu);
    cfg.qk_head_dim = (qk != dims.dh).then_some(qk);
    cfg.tie_embeddings = c.bool_or("tie_word_embeddings", false)?;
    o.embeddings("model.embeddings.weight", "model.norm", "lm_head.weight", &cfg)?;
    gla_weights(o, &cfg, &dims, qk)?;
    Ok(cfg)
}

/// fla GLA's widths: query/key heads `expand_k·d / heads` wide, value heads `expand_v·d / heads`,
/// and the GatedMLP hidden size.
fn gla_dims(c: &HfConfig) -> Result<(Dims, usize)> {
    let (d, heads) = (c.usize(&["hidden_size"])?, c.usize(&["num_heads"])?);
    let kv = c.opt_usize(&["num_kv_heads"])?.unwrap_or(heads);
    // fla: key_dim = int(d·expand_k), value_dim = int(d·expand_v), each split over the heads.
    let width = |key: &str, default: f64| -> Result<usize> {
        let w = (d as f64 * c.f64_or(&[key], default)?).floor();
        match (1.0..1e9).contains(&w) && (w as usize).is_multiple_of(heads) {
            true => Ok(w as usize / heads),
            false => Err(HfConfig::err(
                key,
                format!("hidden_size × {key} = {w} is not a multiple of num_heads {heads}"),
            )),
        }
    };
    let (qk, dh) = (width("expand_k", 0.5)?, width("expand_v", 1.0)?);
    if kv == 0 || !heads.is_multiple_of(kv) {
        return Err(HfConfig::err("num_kv_heads", format!("{kv} does not divide num_heads {heads}")));
    }
    // fla's GatedMLP: intermediate_size, else 2/3 · hidden_ratio · d rounded up to a multiple of 256.
    let hidden = match c.opt_usize(&["intermediate_size"])? {
        Some(h) => h,
        None => {
            let ratio = c.opt_usize(&["hidden_ratio"])?.unwrap_or(4);
            let rounded =
                d.checked_mul(ratio).and_then(|w| w.checked_mul(2)).map(|w| (w / 3).div_ceil(256) * 256);
            rounded.ok_or_else(|| {
                HfConfig::err("hidden_ratio", format!("hidden_size {d} × {ratio} overflows"))
            })?
        }
    };
    let dims = Dims {
        vocab: c.usize(&["vocab_size"])?,
        d,
        layers: c.usize(&["num_hidden_layers"])?,
        heads,
        kv,
        dh,
        hidden,
    };
    Ok((dims, qk))
}

/// Moves fla GLA's per-layer tensors (projections, low-rank gate, head norm, SwiGLU) to attnlab's names.
fn gla_weights(o: &mut Out, cfg: &ModelConfig, dims: &Dims, qk: usize) -> Result<()> {
    let (d, heads, kv, dh, hidden, r) = (dims.d, dims.heads, dims.kv, dims.dh, dims.hidden, GLA_GATE_RANK);
    let (qd, kd, vd, a) =
        (heads.saturating_mul(qk), kv.saturating_mul(qk), kv.saturating_mul(dh), heads.saturating_mul(dh));
    for i in 0..dims.layers {
        let (p, q) = (format!("model.layers.{i}."), format!("layers.{i}."));
        o.norm(&format!("{p}attn_norm"), &format!("{q}attn_norm"), cfg)?;
        o.norm(&format!("{p}mlp_norm"), &format!("{q}ffn_norm"), cfg)?;
        for (hf, ours, shape) in [
            ("attn.q_proj", "attn.wq", [qd, d]),
            ("attn.k_proj", "attn.wk", [kd, d]),
            ("attn.v_proj", "attn.wv", [vd, d]),
            ("attn.o_proj", "attn.wo", [d, a]),
            ("attn.g_proj", "attn.gla.out_gate", [a, d]),
            ("attn.gk_proj.0", "attn.gla.gk_down", [r, d]),
            ("mlp.gate_proj", "ffn.w_gate", [hidden, d]),
            ("mlp.up_proj", "ffn.w_up", [hidden, d]),
            ("mlp.down_proj", "ffn.w_down", [d, hidden]),
        ] {
            o.linear(&format!("{p}{hf}"), &format!("{q}{ours}"), "", shape, false)?;
        }
        // The gate per kv head, repeated for the query heads by the model as fla repeats it.
        o.linear(
            &format!("{p}attn.gk_proj.1"),
            &format!("{q}attn.gla.gk_up"),
            &format!("{q}attn.gla.gk_bias"),
            [kd, r],
            true,
        )?;
        // `g_norm_swish_gate` when fused (fla's default), else `g_norm`: the same RMSNorm weight.
        let fused = format!("{p}attn.g_norm_swish_gate.weight");
        let norm = if o.s.has(&fused) { fused } else { format!("{p}attn.g_norm.weight") };
        let gain = o.s.take(&norm, &[dh])?;
        o.put(format!("{q}attn.gla.head_norm"), &[dh], gain);
    }
    Ok(())
}

/// fla's `gate_low_rank_dim` (a layer argument its model config does not expose).
const GLA_GATE_RANK: usize = 16;

/// The converted tensors, filled from the store.
struct Out<'a> {
    t: Tensors,
    s: &'a mut TensorStore,
}

impl Out<'_> {
    fn put(&mut self, name: String, shape: &[usize], data: Vec<f32>) {
        self.t.insert(name, Tensor { shape: shape.to_vec(), data: self.s.stored(data) });
    }

    /// Token embedding, final norm, and the output head unless tied (a tied checkpoint that also
    /// stores the head copy has it dropped).
    fn embeddings(&mut self, emb: &str, final_norm: &str, head: &str, cfg: &ModelConfig) -> Result<()> {
        let shape = [cfg.vocab_size, cfg.d_model];
        let e = self.s.take(emb, &shape)?;
        self.put("tok_emb.weight".into(), &shape, e);
        self.norm(final_norm, "final_norm", cfg)?;
        match (cfg.tie_embeddings, self.s.has(head)) {
            (false, _) => {
                let h = self.s.take(head, &shape)?;
                self.put("lm_head.weight".into(), &shape, h);
            }
            (true, true) => drop(self.s.take(head, &shape)?),
            (true, false) => {}
        }
        Ok(())
    }

    /// A residual norm `{hf}.weight` (and `.bias` for LayerNorm) as `{ours}.*`.
    fn norm(&mut self, hf: &str, ours: &str, cfg: &ModelConfig) -> Result<()> {
        let d = cfg.d_model;
        let w = self.s.take(&format!("{hf}.weight"), &[d])?;
        self.put(format!("{ours}.weight"), &[d], w);
        if cfg.norm.kind == NormKind::Layernorm {
            let b = self.s.take(&format!("{hf}.bias"), &[d])?;
            self.put(format!("{ours}.bias"), &[d], b);
        }
        Ok(())
    }

    /// `{hf}.weight` `[out, in]` (and `.bias` if `bias`) copied as they are.
    fn linear(&mut self, hf: &str, w: &str, b: &str, shape: [usize; 2], bias: bool) -> Result<()> {
        let data = self.s.take(&format!("{hf}.weight"), &shape)?;
        self.put(w.to_string(), &shape, data);
        if bias {
            let data = self.s.take(&format!("{hf}.bias"), &[shape[0]])?;
            self.put(b.to_string(), &[shape[0]], data);
        }
        Ok(())
    }

    /// One NeoX/BLOOM block `{p}…` as layer `i`: the two norms, the fused QKV, the attention output
    /// `{p}{attn}.dense` and the MLP `dense_h_to_4h` / `dense_4h_to_h` (always with biases).
    fn fused_block(
        &mut self,
        p: &str,
        attn: &str,
        i: usize,
        d: &Dims,
        cfg: &ModelConfig,
        rope: Option<&Rope>,
    ) -> Result<()> {
        let q = format!("layers.{i}.");
        self.norm(&format!("{p}input_layernorm"), &format!("{q}attn_norm"), cfg)?;
        self.norm(&format!("{p}post_attention_layernorm"), &format!("{q}ffn_norm"), cfg)?;
        self.fused_qkv(&format!("{p}{attn}.query_key_value"), &q, d, rope, cfg.biases.qkv)?;
        for (hf, w, b, shape, bias) in [
            (format!("{attn}.dense"), "attn.wo", "attn.bo", [d.d, d.d], cfg.biases.attn_out),
            ("mlp.dense_h_to_4h".to_string(), "ffn.w_up", "ffn.b_up", [d.hidden, d.d], true),
            ("mlp.dense_4h_to_h".to_string(), "ffn.w_down", "ffn.b_down", [d.d, d.hidden], true),
        ] {
            self.linear(&format!("{p}{hf}"), &format!("{q}{w}"), &format!("{q}{b}"), shape, bias)?;
        }
        Ok(())
    }

    /// NeoX/BLOOM fused QKV: rows grouped per head as `[H, 3, dh]` (q, k, v of head 0, then head
    /// 1, …); split into `wq`, `wk`, `wv` (and biases), q and k permuted for RoPE.
    fn fused_qkv(&mut self, hf: &str, q: &str, d: &Dims, rope: Option<&Rope>, bias: bool) -> Result<()> {
        let (a, inp) = (d.heads.saturating_mul(d.dh), d.d);
        let w = self.s.take(&format!("{hf}.weight"), &[a.saturating_mul(3), inp])?;
        let b = if bias { Some(self.s.take(&format!("{hf}.bias"), &[a.saturating_mul(3)])?) } else { None };
        for (k, name) in ["q", "k", "v"].iter().enumerate() {
            // Rows k·dh..(k+1)·dh of each head's block of 3·dh rows, each `row` values wide.
            let part = |data: &[f32], row: usize| -> Vec<f32> {
                let rows = data
                    .chunks_exact(3 * d.dh * row)
                    .flat_map(|h| h[k * d.dh * row..(k + 1) * d.dh * row].to_vec());
                match rope {
                    Some(r) if k < 2 => rotate_half_to_pairs(rows.collect(), d.heads, d.dh, r, row),
                    _ => rows.collect(),
                }
            };
            self.put(format!("{q}attn.w{name}"), &[a, inp], part(&w, inp));
            if let Some(b) = &b {
                self.put(format!("{q}attn.b{name}"), &[a], part(b, 1));
            }
        }
        Ok(())
    }
}

/// `[rows, cols]` → `[cols, rows]`.
fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols).flat_map(|c| (0..rows).map(move |r| w[r * cols + c])).collect()
}

/// Hugging Face rotates channel j with channel j + r/2 of a head (`rotate_half`, over the first r =
/// rotary_dim channels); `rotary.rs` rotates adjacent pairs (2j, 2j + 1) with the same frequency.
/// Reordering the rows of q and k (each `row` values wide) so that row 2j is the old row j and row
/// 2j + 1 the old row j + r/2 makes the two identical; q·k is unchanged because both are reordered.
fn rotate_half_to_pairs(w: Vec<f32>, heads: usize, dh: usize, rope: &Rope, row: usize) -> Vec<f32> {
    let r = rope.rotary_dim.unwrap_or(dh);
    let mut out = w.clone();
    for h in 0..heads {
        for j in 0..r / 2 {
            for (new, old) in [(2 * j, j), (2 * j + 1, j + r / 2)] {
                let (dst, src) = ((h * dh + new) * row, (h * dh + old) * row);
                out[dst..dst + row].copy_from_slice(&w[src..src + row]);
            }
        }
    }
    out
}
