//! The page's fine-tune module: [`Tuner`] wraps the trainer's [`FineTune`] (candle on the CPU,
//! the same step as `attnlab train`) behind an interface of plain values — the model as its two
//! files' bytes, token ids, options and steps as JSON — so the model's worker (`attnlab-web`) can
//! load this module only when the user trains, and hand models across without sharing types.

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
