//! The generator's form (and the fine-tune panel's) as typed: the prompt and the sampling settings as strings (so a half-typed
//! number stays in its box), parsed into [`GenSettings`] when Generate is pressed. Plain Rust,
//! compiled and tested natively.

use crate::engine::GenSettings;
use attnlab_train::finetune::TuneOptions;

/// Largest `max tokens` the form accepts.
pub const MAX_TOKENS_LIMIT: usize = 4096;
/// The prompt the page opens with (also the trace views' text before the first run).
pub const DEFAULT_PROMPT: &str = "The history of the city";

/// One input of the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Prompt,
    MaxTokens,
    Temperature,
    TopK,
    TopP,
    Seed,
}

/// The form's current text, field by field.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsForm {
    pub prompt: String,
    pub max_tokens: String,
    pub temperature: String,
    pub top_k: String,
    pub top_p: String,
    pub seed: String,
}

impl Default for SettingsForm {
    /// The default prompt and [`GenSettings::default`] as text.
    fn default() -> Self {
        let defaults = GenSettings::default();
        SettingsForm {
            prompt: DEFAULT_PROMPT.to_string(),
            max_tokens: defaults.max_tokens.to_string(),
            temperature: defaults.temperature.to_string(),
            top_k: defaults.top_k.to_string(),
            top_p: defaults.top_p.to_string(),
            seed: defaults.seed.to_string(),
        }
    }
}

impl SettingsForm {
    /// Store what the user typed into `field`.
    pub fn set(&mut self, field: Field, value: String) {
        match field {
            Field::Prompt => self.prompt = value,
            Field::MaxTokens => self.max_tokens = value,
            Field::Temperature => self.temperature = value,
            Field::TopK => self.top_k = value,
            Field::TopP => self.top_p = value,
            Field::Seed => self.seed = value,
        }
    }

    /// The settings, or a message for the error box naming the first field out of range.
    pub fn settings(&self) -> Result<GenSettings, String> {
        Ok(GenSettings {
            max_tokens: parse_max_tokens(&self.max_tokens)?,
            temperature: parse_temperature(&self.temperature)?,
            top_k: parse_top_k(&self.top_k)?,
            top_p: parse_top_p(&self.top_p)?,
            seed: parse_seed(&self.seed)?,
        })
    }
}

// One parser per field: the form and the page's URL (`url_state`) accept exactly the same values.

/// `max tokens`: a whole number from 1 to [`MAX_TOKENS_LIMIT`].
pub fn parse_max_tokens(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|n| (1..=MAX_TOKENS_LIMIT).contains(n))
        .ok_or_else(|| format!("max tokens: enter a whole number from 1 to {MAX_TOKENS_LIMIT}"))
}

/// `temperature`: a number from 0 to 10.
pub fn parse_temperature(text: &str) -> Result<f32, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|t: &f32| t.is_finite() && (0.0..=10.0).contains(t))
        .ok_or_else(|| "temperature: enter a number from 0 to 10".to_string())
}

/// `top-k`: a whole number (0 = no cut).
pub fn parse_top_k(text: &str) -> Result<usize, String> {
    text.trim().parse().map_err(|_| "top-k: enter a whole number (0 = no top-k cut)".to_string())
}

/// `top-p`: a number in (0, 1].
pub fn parse_top_p(text: &str) -> Result<f32, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|p: &f32| p.is_finite() && *p > 0.0 && *p <= 1.0)
        .ok_or_else(|| "top-p: enter a number in (0, 1] (1 = no nucleus cut)".to_string())
}

/// `seed`: a whole number that fits 64 bits.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| "seed: enter a whole number from 0 to 18446744073709551615".to_string())
}

/// Most steps one fine-tune may take.
pub const MAX_TUNE_STEPS: usize = 2000;

/// The fine-tune panel's numbers as typed ("train on this text").
#[derive(Debug, Clone, PartialEq)]
pub struct TuneForm {
    pub steps: String,
    pub lr: String,
}

impl Default for TuneForm {
    fn default() -> Self {
        let d = TuneOptions::default();
        TuneForm { steps: d.steps.to_string(), lr: d.lr.to_string() }
    }
}

impl TuneForm {
    /// The options (the trainer's defaults for the rest), or the first field out of range.
    pub fn options(&self) -> Result<TuneOptions, String> {
        let steps = self.steps.trim().parse().ok().filter(|n| (1..=MAX_TUNE_STEPS).contains(n));
        let steps = steps.ok_or_else(|| format!("steps: enter a whole number from 1 to {MAX_TUNE_STEPS}"))?;
        let lr = self.lr.trim().parse().ok().filter(|x: &f64| x.is_finite() && *x > 0.0 && *x <= 0.1);
        let lr = lr.ok_or_else(|| "learning rate: enter a number in (0, 0.1]".to_string())?;
        Ok(TuneOptions { steps, lr, ..TuneOptions::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(field: Field, value: &str) -> Result<GenSettings, String> {
        let mut form = SettingsForm::default();
        form.set(field, value.to_string());
        form.settings()
    }

    #[test]
    fn defaults_parse_to_the_default_settings() {
        let form = SettingsForm::default();
        assert_eq!(form.prompt, DEFAULT_PROMPT);
        assert_eq!(form.settings(), Ok(GenSettings::default()));
    }

    #[test]
    fn values_are_trimmed_and_parsed() {
        let mut form = SettingsForm::default();
        form.set(Field::MaxTokens, " 32 ".into());
        form.set(Field::Temperature, "0".into());
        form.set(Field::TopK, "0".into());
        form.set(Field::TopP, "1".into());
        form.set(Field::Seed, "18446744073709551615".into());
        assert_eq!(
            form.settings(),
            Ok(GenSettings { max_tokens: 32, temperature: 0.0, top_k: 0, top_p: 1.0, seed: u64::MAX })
        );
    }

    #[test]
    fn out_of_range_values_name_their_field() {
        let starts = |r: Result<GenSettings, String>, prefix: &str| {
            let e = r.expect_err("refused");
            assert!(e.starts_with(prefix), "{e}");
        };
        starts(with(Field::MaxTokens, "0"), "max tokens:");
        starts(with(Field::MaxTokens, "4097"), "max tokens:");
        starts(with(Field::MaxTokens, ""), "max tokens:");
        starts(with(Field::Temperature, "10.5"), "temperature:");
        starts(with(Field::Temperature, "NaN"), "temperature:");
        starts(with(Field::Temperature, "-1"), "temperature:");
        starts(with(Field::TopK, "-1"), "top-k:");
        starts(with(Field::TopP, "0"), "top-p:");
        starts(with(Field::TopP, "1.5"), "top-p:");
        starts(with(Field::Seed, "-3"), "seed:");
        starts(with(Field::Seed, "1e3"), "seed:");
    }

    #[test]
    fn the_fine_tune_form_parses_and_names_bad_fields() {
        assert_eq!(TuneForm::default().options(), Ok(TuneOptions::default()));
        let form = |steps: &str, lr: &str| TuneForm { steps: steps.into(), lr: lr.into() }.options();
        assert_eq!(form(" 7 ", "0.01").map(|o| (o.steps, o.lr)), Ok((7, 0.01)));
        for (steps, lr, prefix) in [
            ("0", "0.001", "steps:"),
            ("2001", "0.001", "steps:"),
            ("x", "0.001", "steps:"),
            ("5", "0", "learning rate:"),
            ("5", "NaN", "learning rate:"),
            ("5", "0.5", "learning rate:"),
        ] {
            let e = form(steps, lr).expect_err("refused");
            assert!(e.starts_with(prefix), "{steps} {lr}: {e}");
        }
    }

    #[test]
    fn the_prompt_is_not_validated_here() {
        // An empty prompt is the engine's error ("empty prompt"), reported when the run starts.
        assert!(with(Field::Prompt, "").is_ok());
    }
}
