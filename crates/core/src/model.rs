//! The model: embeddings → pre-norm blocks (attention, FFN) → final norm → logits, and the decode
//! [`Session`] holding a KV cache or recurrent state per layer.

use crate::attention::{AttnLayer, LayerAttention, LayerGates, LayerState, TraceRequest};
use crate::config::{AbsolutePosition, FfnKind, ModelConfig, NormKind};
use crate::error::{Error, Result};
use crate::lowering::Lowering;
use crate::ops::{gelu, gelu_exact, sinusoidal_embedding, Linear, Norm};
use crate::weights::{Init, TensorSpec, Weights};

/// Every tensor a config requires, in a fixed order: embeddings, shared position parameters, then
/// per layer norms, projections, variant tensors and FFN. docs/model-format.md mirrors this list.
pub fn tensor_specs(cfg: &ModelConfig) -> Vec<TensorSpec> {
    let (d, a, kv, hid) = (cfg.d_model, cfg.attn_dim(), cfg.kv_dim(), cfg.ffn.hidden);
    let (qd, kd) = cfg.qk_dims();
    let std_d = 1.0 / (d as f32).sqrt();
    // Residual-branch outputs are scaled down with depth (GPT-2 style) so random models stay tame.
    let std_out = |inp: usize| 1.0 / (inp as f32).sqrt() / (2.0 * cfg.n_layers as f32).sqrt();
    let mut v = vec![TensorSpec::new_matrix("tok_emb.weight", &[cfg.vocab_size, d], Init::Normal(std_d))];
    if !cfg.tie_embeddings {
        v.push(TensorSpec::new_matrix("lm_head.weight", &[cfg.vocab_size, d], Init::Normal(std_d)));
    }
    let norm = |v: &mut Vec<TensorSpec>, name: &str| {
        v.push(TensorSpec::new(format!("{name}.weight"), &[d], Init::Const(1.0)));
        if cfg.norm.kind == NormKind::Layernorm {
            v.push(TensorSpec::new(format!("{name}.bias"), &[d], Init::Const(0.0)));
        }
    };
    if cfg.absolute_position == AbsolutePosition::Learned {
        v.push(TensorSpec::new("pos_emb.weight", &[cfg.max_context, d], Init::Normal(0.02)));
    }
    if cfg.embedding_norm {
        norm(&mut v, "emb_norm");
    }
    norm(&mut v, "final_norm");
    // Shared position parameters, once per variant id (KERPLE-style sharing across layers).
    let mut seen = std::collections::BTreeSet::new();
    for spec in cfg.layers.iter().filter(|s| seen.insert(s.variant_id())) {
        v.extend(spec.variant().shared_tensors(cfg));
    }
    for (i, spec) in cfg.layers.iter().enumerate() {
        norm(&mut v, &format!("layers.{i}.attn_norm"));
        norm(&mut v, &format!("layers.{i}.ffn_norm"));
        let (attn, ffn) = (|n: &str| format!("layers.{i}.attn.{n}"), |n: &str| format!("layers.{i}.ffn.{n}"));
        let (qkv, out, fb) = (cfg.biases.qkv, cfg.biases.attn_out, cfg.biases.ffn);
        push_linear(&mut v, attn("wq"), [qd, d], std_d, qkv.then(|| attn("bq")));
        push_linear(&mut v, attn("wk"), [kd, d], std_d, qkv.then(|| attn("bk")));
        push_linear(&mut v, attn("wv"), [kv, d], std_d, qkv.then(|| attn("bv")));
        push_linear(&mut v, attn("wo"), [d, a], std_out(a), out.then(|| attn("bo")));
        v.extend(spec.variant().layer_tensors(cfg, i));
        if cfg.ffn.kind == FfnKind::Swiglu {
            push_linear(&mut v, ffn("w_gate"), [hid, d], std_d, fb.then(|| ffn("b_gate")));
        }
        push_linear(&mut v, ffn("w_up"), [hid, d], std_d, fb.then(|| ffn("b_up")));
        push_linear(&mut v, ffn("w_down"), [d, hid], std_out(hid), fb.then(|| ffn("b_down")));
    }
    v
}

/// A weight `[out, in]` (a matrix, kept in its file's dtype) and, if `bias` names one, its bias
/// `[out]` (zeros at init).
fn push_linear(v: &mut Vec<TensorSpec>, name: String, shape: [usize; 2], std: f32, bias: Option<String>) {
    v.push(TensorSpec::new_matrix(name, &shape, Init::Normal(std)));
    v.extend(bias.map(|b| TensorSpec::new(b, &[shape[0]], Init::Const(0.0))));
}

#[derive(Debug, Clone)]
struct Ffn {
    kind: FfnKind,
    gate: Option<Linear>,
    up: Linear,
    down: Linear,
}

impl Ffn {
    fn apply_rows(&self, x: &[f32], t: usize) -> Vec<f32> {
        let mut u = self.up.apply_rows(x, t);
        match (self.kind, &self.gate) {
            (FfnKind::Swiglu, Some(g)) => {
                let gv = g.apply_rows(x, t);
                crate::kernels::silu_mul(&mut u, &gv);
            }
            (FfnKind::GeluExact, _) => u.iter_mut().for_each(|u| *u = gelu_exact(*u)),
            _ => u.iter_mut().for_each(|u| *u = gelu(*u)),
        }
        self.down.apply_rows(&u, t)
    }
}

/// `x += y` elementwise.
fn add_into(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(x, y)| *x += y);
}

#[derive(Debug, Clone)]
struct Block {
    attn_norm: Norm,
    ffn_norm: Norm,
    attn: AttnLayer,
    ffn: Ffn,
}

impl Block {
    /// One pre-norm block over `t` rows of the residual stream `x` (`[t, d]`); `attend` runs the
    /// attention on the normed rows. Sequential: `x += attn(n₁(x)); x += ffn(n₂(x))`; parallel
    /// (Black et al., "GPT-NeoX-20B", §2.1): `x += attn(n₁(x)) + ffn(n₂(x))`, both read the block's
    /// input.
    fn forward(
        &self,
        x: &mut [f32],
        t: usize,
        parallel: bool,
        attend: impl FnOnce(&[f32]) -> Result<Vec<f32>>,
    ) -> Result<()> {
        let d = x.len() / t;
        let a = attend(&self.attn_norm.apply_rows(x, d))?;
        if !parallel {
            add_into(x, &a);
        }
        let f = self.ffn.apply_rows(&self.ffn_norm.apply_rows(x, d), t);
        add_into(x, &f);
        if parallel {
            add_into(x, &a);
        }
        Ok(())
    }
}

/// Where the CPU cannot widen half values in hardware, a model whose matrices take at most this
/// much as f32 holds them as f32 ([`Weights::widen_small_matrices`]): the shipped 1.1M-parameter
/// models take 4.4 MB; a 100M+ checkpoint keeps its halves.
pub const SMALL_MODEL_F32_BYTES: usize = 32 << 20;

/// A loaded, validated model ready to run on the CPU. Its matrices are held once, in the dtype they
/// were stored in (but for small models where the CPU cannot widen halves in hardware, see
/// [`SMALL_MODEL_F32_BYTES`]): `weights` and the per-layer [`Linear`]s share them.
#[derive(Debug, Clone)]
pub struct Model {
    cfg: ModelConfig,
    weights: Weights,
    /// The output head `[V, d]`: `lm_head.weight`, or `tok_emb.weight` when tied.
    head: Linear,
    final_norm: Norm,
    emb_norm: Option<Norm>,
    blocks: Vec<Block>,
}

/// Introspection recorded by [`Model::trace`].
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// `[T, vocab]` logits.
    pub logits: Vec<f32>,
    pub attention: Vec<LayerAttention>,
    pub gates: Vec<LayerGates>,
}

impl Model {
    /// Build from a config and a weight set (checked against [`tensor_specs`]). Matrices stay in
    /// the dtype they are held in; other tensors are widened to f32.
    pub fn new(cfg: ModelConfig, mut weights: Weights) -> Result<Model> {
        cfg.validate()?;
        let specs = tensor_specs(&cfg);
        weights.check(&specs)?;
        weights.widen_non_matrices(&specs);
        if !crate::kernels::level().widens_halves_in_hardware() {
            weights.widen_small_matrices(SMALL_MODEL_F32_BYTES);
        }
        let norm = |name: &str| -> Result<Norm> {
            let w = weights.get(&format!("{name}.weight"))?.to_vec();
            let b = match cfg.norm.kind {
                NormKind::Layernorm => Some(weights.get(&format!("{name}.bias"))?.to_vec()),
                NormKind::Rmsnorm => None,
            };
            Ok(Norm::new(&cfg.norm, w, b))
        };
        let (d, hid) = (cfg.d_model, cfg.ffn.hidden);
        let mut blocks = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let lin = |n: &str, out: usize, inp: usize| -> Result<Linear> {
                let name = |p: &str| format!("layers.{i}.ffn.{p}_{n}");
                let l = Linear::new(weights.tensor(&name("w"))?.data.clone(), out, inp);
                Ok(match cfg.biases.ffn {
                    true => l.with_bias(weights.get(&name("b"))?.to_vec()),
                    false => l,
                })
            };
            blocks.push(Block {
                attn_norm: norm(&format!("layers.{i}.attn_norm"))?,
                ffn_norm: norm(&format!("layers.{i}.ffn_norm"))?,
                attn: AttnLayer::new(&cfg, i, &weights)?,
                ffn: Ffn {
                    kind: cfg.ffn.kind,
                    gate: if cfg.ffn.kind == FfnKind::Swiglu { Some(lin("gate", hid, d)?) } else { None },
                    up: lin("up", hid, d)?,
                    down: lin("down", d, hid)?,
                },
            });
        }
        let final_norm = norm("final_norm")?;
        let emb_norm = if cfg.embedding_norm { Some(norm("emb_norm")?) } else { None };
        let head_name = if cfg.tie_embeddings { "tok_emb.weight" } else { "lm_head.weight" };
        let head = Linear::new(weights.tensor(head_name)?.data.clone(), cfg.vocab_size, d);
        Ok(Model { cfg, weights, head, final_norm, emb_norm, blocks })
    }

    /// Parse `config.json` text and `model.safetensors` bytes, validating everything.
    pub fn from_bytes(config_json: &str, safetensors: &[u8]) -> Result<Model> {
        let cfg = ModelConfig::from_json(config_json)?;
        let weights = Weights::from_safetensors(safetensors, &tensor_specs(&cfg))?;
        Model::new(cfg, weights)
    }

    /// Seeded random weights for any config (`attnlab init`).
    pub fn random(cfg: ModelConfig, seed: u64) -> Result<Model> {
        cfg.validate()?;
        let weights = Weights::random(&tensor_specs(&cfg), seed);
        Model::new(cfg, weights)
    }

    /// Load a model folder (native only): an attnlab folder (`config.json` and `model.safetensors`),
    /// or a supported Hugging Face checkpoint folder, converted on load ([`crate::hf`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_dir(dir: &std::path::Path) -> Result<Model> {
        let cpath = dir.join("config.json");
        let text = std::fs::read_to_string(&cpath).map_err(|e| Error::io(&cpath, e))?;
        if crate::hf::is_hf_config(&text) {
            let imported = crate::hf::import_dir(dir, crate::hf::ImportOptions::default())?;
            return Model::new(imported.config, imported.weights);
        }
        let wpath = dir.join("model.safetensors");
        let bytes = std::fs::read(&wpath).map_err(|e| Error::io(&wpath, e))?;
        Model::from_bytes(&text, &bytes)
    }

    /// Write `config.json` and `model.safetensors` (F32) into `dir` (created if missing).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn save_dir(&self, dir: &std::path::Path) -> Result<()> {
        self.save_dir_as(dir, crate::weights::StorageDtype::F32)
    }

    /// [`Model::save_dir`] with the weights stored as `dtype` (the shipped models are F16).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn save_dir_as(&self, dir: &std::path::Path, dtype: crate::weights::StorageDtype) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let cpath = dir.join("config.json");
        std::fs::write(&cpath, self.cfg.to_json() + "\n").map_err(|e| Error::io(&cpath, e))?;
        let wpath = dir.join("model.safetensors");
        let meta = std::collections::HashMap::from([("format".to_string(), "attnlab".to_string())]);
        std::fs::write(&wpath, self.weights.to_safetensors_as(dtype, Some(meta))?)
            .map_err(|e| Error::io(&wpath, e))
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The model's weights (matrices in their stored dtype, shared with the layers).
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// Prepared attention layer `i` (bias tables, specs).
    pub fn attention(&self, i: usize) -> Option<&AttnLayer> {
        self.blocks.get(i).map(|b| &b.attn)
    }

    /// Every layer's lowered attention, in layer order: computed once when the model was built, and
    /// what every backend (GPU inference, both trainers) takes instead of lowering the layers again.
    pub fn lowerings(&self) -> impl ExactSizeIterator<Item = &Lowering> {
        self.blocks.iter().map(|b| b.attn.lowering())
    }

    /// The feed-forward projections of layer `i` with their biases: `(gate, up, down)`, the gate
    /// only with SwiGLU.
    pub fn ffn_projections(&self, i: usize) -> Option<(Option<&Linear>, &Linear, &Linear)> {
        self.blocks.get(i).map(|b| (b.ffn.gate.as_ref(), &b.ffn.up, &b.ffn.down))
    }

    /// Replace the attention spec of layer `i` at inference time (slope and kernel-mix sliders).
    /// The new spec must need the same tensors; the config is revalidated.
    pub fn set_layer_spec(&mut self, i: usize, spec: crate::config::AttentionSpec) -> Result<()> {
        if i >= self.cfg.n_layers {
            return Err(Error::arg(
                "layer",
                format!("{i} is out of range (model has {} layers)", self.cfg.n_layers),
            ));
        }
        let mut cfg = self.cfg.clone();
        cfg.layers[i] = spec;
        cfg.validate()?;
        if tensor_specs(&cfg)
            .iter()
            .map(|s| (&s.name, &s.shape))
            .ne(tensor_specs(&self.cfg).iter().map(|s| (&s.name, &s.shape)))
        {
            return Err(Error::arg(
                "spec",
                "the new attention spec needs different tensors than the trained model has",
            ));
        }
        self.blocks[i].attn = AttnLayer::new(&cfg, i, &self.weights)?;
        self.cfg = cfg;
        Ok(())
    }

    /// A fresh decode session (empty KV caches / zero states).
    pub fn session(&self) -> Session<'_> {
        Session { model: self, states: self.blocks.iter().map(|b| b.attn.new_state()).collect(), pos: 0 }
    }

    /// Prefill `tokens` from position 0 and record the requested introspection.
    pub fn trace(&self, tokens: &[u32], req: TraceRequest) -> Result<Trace> {
        let mut s = self.session();
        let mut trace = Trace::default();
        trace.logits = s.run(tokens, true, req, Some(&mut trace))?;
        Ok(trace)
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= self.cfg.vocab_size) {
            return Err(Error::TokenOutOfRange { id, vocab: self.cfg.vocab_size });
        }
        Ok(())
    }

    fn embed(&self, tokens: &[u32], pos0: usize) -> Result<Vec<f32>> {
        let d = self.cfg.d_model;
        let emb = &self.weights.tensor("tok_emb.weight")?.data;
        let mut x = Vec::with_capacity(tokens.len() * d);
        let (mut pe, mut scratch) = (vec![0.0f32; d], vec![0.0f32; d]);
        let scale = self.cfg.embedding_scale();
        for (r, &id) in tokens.iter().enumerate() {
            let row = emb.row(id as usize * d, &mut scratch);
            match self.cfg.absolute_position {
                AbsolutePosition::Sinusoidal => sinusoidal_embedding(pos0 + r, d, &mut pe),
                AbsolutePosition::Learned => {
                    let s = (pos0 + r) * d;
                    pe.copy_from_slice(&self.weights.get("pos_emb.weight")?[s..s + d]);
                }
                AbsolutePosition::None => {}
            }
            // Vaswani §3.4: token rows × √d_model (× 1, exactly, without `scale_embeddings`).
            x.extend(row.iter().zip(&pe).map(|(a, b)| a * scale + b));
        }
        Ok(match &self.emb_norm {
            Some(n) => n.apply_rows(&x, d),
            None => x,
        })
    }

    fn logits_rows(&self, x: &[f32], t: usize) -> Result<Vec<f32>> {
        Ok(self.head.apply_rows(&self.final_norm.apply_rows(x, self.cfg.d_model), t))
    }
}

/// Decode state of one generation: per-layer KV cache or recurrent state, and the next position.
#[derive(Debug, Clone)]
pub struct Session<'m> {
    model: &'m Model,
    states: Vec<LayerState>,
    pos: usize,
}

impl<'m> Session<'m> {
    /// Number of tokens consumed so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// True before any token was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Bytes of KV cache / recurrent state held.
    pub fn state_bytes(&self) -> usize {
        self.states.iter().map(LayerState::bytes).sum()
    }

    /// Consume `tokens` with the parallel/chunked path; returns the logits of the last token.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        let all = self.run(tokens, false, TraceRequest::default(), None)?;
        Ok(all)
    }

    /// Like [`Session::prefill`] but returns `[T, vocab]` logits for every token.
    pub fn prefill_all(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        self.run(tokens, true, TraceRequest::default(), None)
    }

    /// One decode step through the recurrent/KV path; returns this token's logits.
    pub fn step(&mut self, token: u32) -> Result<Vec<f32>> {
        let m = self.model;
        m.check_tokens(&[token])?;
        self.check_room(1)?;
        let mut x = m.embed(&[token], self.pos)?;
        for (b, st) in m.blocks.iter().zip(self.states.iter_mut()) {
            b.forward(&mut x, 1, m.cfg.parallel_residual, |h| b.attn.step(h, self.pos, st))?;
        }
        self.pos += 1;
        m.logits_rows(&x, 1)
    }

    fn check_room(&self, t: usize) -> Result<()> {
        let max = self.model.cfg.max_context;
        if self.pos + t > max {
            return Err(Error::ContextTooLong { requested: self.pos + t, max });
        }
        Ok(())
    }

    fn run(
        &mut self,
        tokens: &[u32],
        all_logits: bool,
        req: TraceRequest,
        mut trace: Option<&mut Trace>,
    ) -> Result<Vec<f32>> {
        let m = self.model;
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        m.check_tokens(tokens)?;
        self.check_room(tokens.len())?;
        let (t, d) = (tokens.len(), m.cfg.d_model);
        let mut x = m.embed(tokens, self.pos)?;
        for (li, (b, st)) in m.blocks.iter().zip(self.states.iter_mut()).enumerate() {
            let mut lt = None;
            b.forward(&mut x, t, m.cfg.parallel_residual, |h| {
                let (a, l) = b.attn.prefill(h, t, self.pos, st, req, li)?;
                lt = Some(l);
                Ok(a)
            })?;
            if let (Some(tr), Some(lt)) = (trace.as_deref_mut(), lt) {
                tr.attention.extend(lt.attention);
                tr.gates.extend(lt.gates);
            }
        }
        self.pos += t;
        if all_logits {
            m.logits_rows(&x, t)
        } else {
            m.logits_rows(&x[(t - 1) * d..], 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SizePreset;
    use crate::weights::StorageDtype;

    /// An F16 model keeps its halves where F16C widens them, holds f32 copies (the same values,
    /// tied buffers widened once) where the level has no such instruction and the model is small,
    /// and computes the same logits either way; a model over the bound keeps its halves.
    #[test]
    fn small_half_models_hold_f32_matrices_where_widening_is_costly() {
        use crate::kernels::{with_level, Level};
        let m = Model::random(ModelConfig::preset("alibi", SizePreset::tiny(64)).unwrap(), 3).unwrap();
        let f16 = m.weights.to_safetensors_as(StorageDtype::F16, None).unwrap();
        let cfg_json = m.cfg.to_json();
        let dtypes =
            |m: &Model| -> Vec<StorageDtype> { m.weights.tensors.values().map(|t| t.data.dtype()).collect() };
        let logits = |m: &Model| m.session().prefill(&[1, 2, 3, 4, 5]).unwrap();
        let halves = Model::from_bytes(&cfg_json, &f16).unwrap();
        assert!(dtypes(&halves).contains(&StorageDtype::F16));
        let widened = with_level(Level::Sse2, || Model::from_bytes(&cfg_json, &f16).unwrap());
        assert!(dtypes(&widened).iter().all(|&d| d == StorageDtype::F32), "{:?}", dtypes(&widened));
        for (name, t) in &halves.weights.tensors {
            assert_eq!(t.data.to_f32(), widened.weights.tensors[name].data.to_f32(), "{name}");
        }
        assert_eq!(logits(&halves), logits(&widened));
        let mut w = halves.weights.clone();
        assert!(!w.widen_small_matrices(1024), "over the bound: halves kept");
        assert!(w.widen_small_matrices(usize::MAX));
    }

    /// (token energy, position energy) of the embedded rows, and whether every value is exactly
    /// `scale · tok_emb[id] + PE(pos)`.
    fn energies(m: &Model, tokens: &[u32], scale: f32) -> (f64, f64, bool) {
        let d = m.cfg.d_model;
        let x = m.embed(tokens, 0).unwrap();
        let emb = &m.weights.tensor("tok_emb.weight").unwrap().data;
        let (mut pe, mut scratch) = (vec![0.0f32; d], vec![0.0f32; d]);
        let (mut tok_e, mut pos_e, mut exact) = (0.0, 0.0, true);
        for (r, &id) in tokens.iter().enumerate() {
            let row = emb.row(id as usize * d, &mut scratch);
            sinusoidal_embedding(r, d, &mut pe);
            for c in 0..d {
                tok_e += (scale as f64 * row[c] as f64).powi(2);
                pos_e += (pe[c] as f64).powi(2);
                exact &= x[r * d + c].to_bits() == (row[c] * scale + pe[c]).to_bits();
            }
        }
        (tok_e, pos_e, exact)
    }

    /// Vaswani §3.4 ("we multiply those weights by √d_model"): the sinusoidal preset scales the token
    /// rows, so at init (rows N(0, 1/√d), energy ≈ 1 against the table's d/2) the token part carries
    /// most of each input row's energy; the same weights unscaled leave ≈ 2/d of it to the token.
    #[test]
    fn sinusoidal_preset_scales_token_rows_by_sqrt_d_model() {
        let cfg = ModelConfig::preset("sinusoidal", SizePreset::default()).unwrap();
        assert!(cfg.scale_embeddings);
        assert!(!ModelConfig::preset("alibi", SizePreset::default()).unwrap().scale_embeddings);
        let d = cfg.d_model;
        assert_eq!(cfg.embedding_scale(), (d as f64).sqrt() as f32);
        let tokens: Vec<u32> =
            (0..cfg.train_context as u32).map(|i| (i * 37) % cfg.vocab_size as u32).collect();
        let scaled = Model::random(cfg.clone(), 7).unwrap();
        let (tok, pos, exact) = energies(&scaled, &tokens, cfg.embedding_scale());
        assert!(exact, "scaled embedding ≠ √d · row + PE");
        assert!(tok / (tok + pos) > 0.6, "token share {}", tok / (tok + pos));

        let off = ModelConfig { scale_embeddings: false, ..cfg };
        assert_eq!(off.embedding_scale(), 1.0);
        let plain = Model::random(off, 7).unwrap();
        let (tok, pos, exact) = energies(&plain, &tokens, 1.0);
        assert!(exact, "unscaled embedding ≠ row + PE");
        assert!(tok / (tok + pos) < 0.05, "token share {}", tok / (tok + pos));
    }
}
