//! What a run was trained on (length, schedule budget, storage), read from each model: the report's
//! introduction states it, and a perplexity claim compares only runs that share it.

use super::{seed_of, Context, ModelResult};
use std::collections::BTreeMap;

/// What two models must share for a perplexity claim to compare them: (training length, the
/// schedule's token budget; None when the model has no history.json).
pub(super) type Setup = (usize, Option<u64>);

pub(super) fn setup_of(r: &ModelResult) -> Setup {
    (r.train_context, r.training.as_ref().map(|t| t.budget))
}

pub(super) fn describe_setup((len, budget): Setup) -> String {
    match budget {
        Some(t) => format!("length {len}, a budget of {} tokens", group_digits(t)),
        None => format!("length {len}, token budget unknown"),
    }
}

/// Seeds of one model (`NAME`, `NAME-seedK`) must share its setup: the report averages them and
/// resamples seed pairs as repeats of one run. `models`: each model's name and setup.
pub(super) fn check_seeds_alike(models: &[(String, Setup)]) -> Result<(), String> {
    for (name, setup) in models {
        let (group, k) = seed_of(name);
        let first = models.iter().find(|(n, _)| n == group).map(|(_, s)| *s);
        match first {
            Some(s0) if k > 0 && s0 != *setup => {
                return Err(format!(
                    "`{name}` is a seed of `{group}` but was not trained alike ({} vs {}): retrain it or take it \
                     out of index.json",
                    describe_setup(*setup),
                    describe_setup(s0)
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// `22528000` → "22,528,000".
fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Context<'_> {
    /// Ok when the trained seeds of `names` share one setup (training length and budget); else why
    /// a claim cannot compare them. Initial checkpoints and names not in the index are left out.
    pub(super) fn alike(&self, names: &[&str]) -> Result<(), String> {
        // Each name's setup (its seeds share it: `check_seeds_alike`), in the order given.
        let setups: Vec<(&str, Setup)> = names
            .iter()
            .filter_map(|n| {
                self.seeds(n).into_iter().find(|r| r.initial_of.is_none()).map(|r| (*n, setup_of(r)))
            })
            .collect();
        if setups.windows(2).all(|w| w[0].1 == w[1].1) {
            return Ok(());
        }
        let each: Vec<String> =
            setups.iter().map(|(n, s)| format!("`{n}` ({})", describe_setup(*s))).collect();
        Err(format!(
            "{} were not trained alike; a claim compares models of one training length and budget",
            each.join(" and ")
        ))
    }

    /// The trained models' training lengths, budgets and storage, read from each model (one clause
    /// when they all agree; otherwise which model has which).
    pub(super) fn setup_sentence(&self) -> String {
        let mut by_setup: BTreeMap<Setup, Vec<&str>> = BTreeMap::new();
        let mut by_dtype: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for r in self.groups() {
            by_setup.entry(setup_of(r)).or_default().push(&r.name);
            by_dtype.entry(&r.dtype).or_default().push(&r.name);
        }
        let which = |names: &[&str]| names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let stored = match by_dtype.len() {
            1 => format!("stored as {}", by_dtype.keys().next().map_or("–", |d| d).to_uppercase()),
            _ => format!(
                "stored as {}",
                by_dtype
                    .iter()
                    .map(|(d, n)| format!("{} ({})", d.to_uppercase(), which(n)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        match by_setup.len() {
            0 => format!("{stored}."),
            1 => format!("all at {}, {stored}.", by_setup.keys().next().map_or(String::new(), |s| describe_setup(*s))),
            _ => format!(
                "the setups differ: {}; {stored}. A perplexity claim compares only models trained at one length \
                 and budget (\"not tested\" otherwise).",
                by_setup.iter().map(|(s, n)| format!("{} ({})", describe_setup(*s), which(n))).collect::<Vec<_>>().join("; ")
            ),
        }
    }
}
