//! The page's fine-tune module: [`Tuner`] wraps the trainer's [`FineTune`] (candle on the CPU,
//! the same step as `attnlab train`) and `GpuTuner` its `GpuFineTune` (the WGSL trainer on
//! WebGPU, every call a promise) behind an interface of plain values — the model as its two files'
//! bytes, token ids, options and steps as JSON — so the model's worker (`attnlab-web`) can load this
//! module only when the user trains, and hand models across without sharing types.

use attnlab_core::Model;
use attnlab_train::finetune::{FineTune, TuneOptions};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen::prelude::wasm_bindgen;

/// A fine-tune of one model on one text, a step at a time.
#[cfg_attr(target_arch = "wasm32", wasm_bindgen)]
pub struct Tuner {
    tune: FineTune,
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen)]
impl Tuner {
    /// Start from the model given as its `config.json` text and `model.safetensors` bytes, on the
    /// token ids `tokens`, with [`TuneOptions`] as JSON. Every refusal is one line naming the
    /// problem (a bad file, a text too short, options out of range, a model too large).
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen(constructor))]
    pub fn new(
        config_json: &str,
        weights: &[u8],
        tokens: &[u32],
        options_json: &str,
    ) -> Result<Tuner, String> {
        let model = Model::from_bytes(config_json, weights).map_err(|e| e.to_string())?;
        let options: TuneOptions =
            serde_json::from_str(options_json).map_err(|e| format!("fine-tune options: {e}"))?;
        let tune = FineTune::new(&model, tokens.to_vec(), &options).map_err(|e| e.to_string())?;
        Ok(Tuner { tune })
    }

    /// Tokens per training window.
    pub fn seq_len(&self) -> usize {
        self.tune.seq_len()
    }

    /// Whether every step asked for is done.
    pub fn finished(&self) -> bool {
        self.tune.finished()
    }

    /// One optimizer step; the finished step (`TuneStep`) as JSON.
    pub fn step(&mut self) -> Result<String, String> {
        let step = self.tune.step().map_err(|e| e.to_string())?;
        serde_json::to_string(&step).map_err(|e| e.to_string())
    }

    /// Mean next-token loss over the whole text.
    pub fn text_loss(&self) -> Result<f32, String> {
        self.tune.text_loss().map_err(|e| e.to_string())
    }

    /// The model after the last finished step, as `model.safetensors` bytes (F32) for the config
    /// it was given.
    pub fn weights(&self) -> Result<Vec<u8>, String> {
        let model = self.tune.model().map_err(|e| e.to_string())?;
        model.weights().to_safetensors(None).map_err(|e| e.to_string())
    }
}

#[cfg(target_arch = "wasm32")]
mod gpu {
    use attnlab_core::Model;
    use attnlab_gpu::GpuContext;
    use attnlab_train::finetune::{GpuFineTune, TuneOptions};
    use js_sys::{Promise, Uint8Array};
    use std::cell::RefCell;
    use std::rc::Rc;
    use wasm_bindgen::prelude::wasm_bindgen;
    use wasm_bindgen::JsValue;
    use wasm_bindgen_futures::future_to_promise;

    /// [`super::Tuner`] on WebGPU: the same fine-tune, each step's forward, backward and AdamW in
    /// WGSL on the worker's own device. The methods that touch the GPU return promises.
    #[wasm_bindgen]
    pub struct GpuTuner {
        /// Taken out while a call is in flight (a second call meanwhile is refused).
        tune: Rc<RefCell<Option<GpuFineTune>>>,
        seq_len: usize,
        device: String,
    }

    fn fail(e: impl ToString) -> JsValue {
        JsValue::from_str(&e.to_string())
    }

    /// Run `f` on the fine-tune, handing it back afterwards.
    fn with_tune<T: Into<JsValue>, F, Fut>(tune: &Rc<RefCell<Option<GpuFineTune>>>, f: F) -> Promise
    where
        F: FnOnce(GpuFineTune) -> Fut + 'static,
        Fut: std::future::Future<Output = (GpuFineTune, Result<T, String>)> + 'static,
    {
        let slot = tune.clone();
        future_to_promise(async move {
            let taken = slot.borrow_mut().take().ok_or_else(|| fail("the fine-tune is busy"))?;
            let (back, out) = f(taken).await;
            *slot.borrow_mut() = Some(back);
            out.map(Into::into).map_err(fail)
        })
    }

    #[wasm_bindgen]
    impl GpuTuner {
        /// Start on WebGPU from the model's files, the token ids and [`TuneOptions`] as JSON: a
        /// promise of the tuner, or of one line naming the problem (no adapter, a bad file, a
        /// text too short, options out of range).
        pub async fn create(
            config_json: String,
            weights: Vec<u8>,
            tokens: Vec<u32>,
            options_json: String,
        ) -> Result<GpuTuner, JsValue> {
            let model = Model::from_bytes(&config_json, &weights).map_err(fail)?;
            let options: TuneOptions =
                serde_json::from_str(&options_json).map_err(|e| fail(format!("fine-tune options: {e}")))?;
            let ctx = GpuContext::new().await.map_err(fail)?;
            let tune = GpuFineTune::new(&ctx, &model, tokens, &options).await.map_err(fail)?;
            let (seq_len, device) = (tune.seq_len(), tune.device());
            Ok(GpuTuner { tune: Rc::new(RefCell::new(Some(tune))), seq_len, device })
        }

        /// Tokens per training window.
        pub fn seq_len(&self) -> usize {
            self.seq_len
        }

        /// The adapter it trains on.
        pub fn device(&self) -> String {
            self.device.clone()
        }

        /// Whether every step asked for is done.
        pub fn finished(&self) -> bool {
            self.tune.borrow().as_ref().is_none_or(|t| t.finished())
        }

        /// One optimizer step: a promise of the step as JSON.
        pub fn step(&self) -> Promise {
            with_tune(&self.tune, |mut t| async move {
                let out = t.step().await.map_err(|e| e.to_string());
                let json = out.and_then(|s| serde_json::to_string(&s).map_err(|e| e.to_string()));
                (t, json)
            })
        }

        /// A promise of the mean next-token loss over the whole text.
        pub fn text_loss(&self) -> Promise {
            with_tune(&self.tune, |t| async move {
                let out = t.text_loss().await.map(f64::from).map_err(|e| e.to_string());
                (t, out)
            })
        }

        /// A promise of the model after the last finished step, as `model.safetensors` bytes (F32).
        pub fn weights(&self) -> Promise {
            with_tune(&self.tune, |t| async move {
                let out = match t.model().await {
                    Ok(m) => m.weights().to_safetensors(None).map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                (t, out.map(|b| Uint8Array::from(b.as_slice())))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use attnlab_core::config::{ModelConfig, SizePreset};
    use attnlab_train::finetune::TuneStep;

    fn files() -> (String, Vec<u8>, Model) {
        let size = SizePreset::tiny(64);
        let model = Model::random(ModelConfig::preset("regla", size).expect("preset"), 3).expect("model");
        let bytes = model.weights().to_safetensors(None).expect("safetensors");
        (model.config().to_json(), bytes, model)
    }

    #[test]
    fn steps_come_back_as_json_and_the_weights_load_as_the_tuned_model() {
        let (config, bytes, base) = files();
        let tokens: Vec<u32> = (0..120).map(|i| (i * 5 % 64) as u32).collect();
        let options = r#"{"steps":6,"lr":0.005,"batch":2,"seq_len":16,"seed":0}"#;
        let mut tuner = Tuner::new(&config, &bytes, &tokens, options).expect("tuner");
        assert_eq!(tuner.seq_len(), 16);
        let before = tuner.text_loss().expect("loss");
        let mut steps = Vec::new();
        while !tuner.finished() {
            let step: TuneStep = serde_json::from_str(&tuner.step().expect("step")).expect("json");
            steps.push(step.step);
        }
        assert_eq!(steps, vec![1, 2, 3, 4, 5, 6]);
        assert!(tuner.text_loss().expect("loss") < before);
        let tuned = Model::from_bytes(&config, &tuner.weights().expect("weights")).expect("loads");
        let ids = &tokens[..20];
        assert_ne!(
            tuned.session().prefill_all(ids).expect("tuned"),
            base.session().prefill_all(ids).expect("base")
        );
    }

    #[test]
    fn bad_files_and_options_are_named() {
        let (config, bytes, _) = files();
        let tokens = [1u32; 20];
        let opts = r#"{"steps":6,"lr":0.005,"batch":2,"seq_len":16,"seed":0}"#;
        let err = |c: &str, b: &[u8], o: &str| Tuner::new(c, b, &tokens, o).err().expect("refused");
        assert!(
            err(&config, &bytes[..40], opts).contains("safetensors"),
            "{}",
            err(&config, &bytes[..40], opts)
        );
        assert!(err("{", &bytes, opts).contains("config"), "{}", err("{", &bytes, opts));
        assert!(err(&config, &bytes, "{\"steps\":1}").starts_with("fine-tune options:"));
        assert!(err(&config, &bytes, r#"{"steps":0,"lr":0.005,"batch":2,"seq_len":16,"seed":0}"#)
            .contains("at least 1"));
    }
}
