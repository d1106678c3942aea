//! The claims table of `attnlab report`: each paper's claims, the rule applied to our numbers, and
//! the verdict.

use super::{both, le, lt, num, r3, verdict, Context};

impl Context<'_> {
    /// Claim rows of MEP: claim, test, measured, verdict.
    pub(super) fn claims_mep(&self) -> Vec<[String; 4]> {
        let l = self.longest();
        let r = |x: Option<f64>| x.map_or("–".to_string(), |v| num(v, 1));
        let p = |n: &str, m: usize| self.ppl_at(n, m);
        vec![
            [
                "Parameter-free MEP extrapolates at least as well as ALiBi (Table 2)".into(),
                format!("ppl(mep) ≤ ppl(alibi) at {l}×"),
                format!("mep {} vs alibi {}", r(p("mep", l)), r(p("alibi", l))),
                verdict(le(p("mep", l), p("alibi", l))).into(),
            ],
            [
                "Parameterized MEP beats KERPLE-log at long lengths (Table 2, OWT2 4/5)".into(),
                format!("ppl(mep-param) < ppl(kerple-log) at {l}×"),
                format!("mep-param {} vs kerple-log {}", r(p("mep-param", l)), r(p("kerple-log", l))),
                verdict(lt(p("mep-param", l), p("kerple-log", l))).into(),
            ],
            [
                "MEP beats T5 at the longest lengths (Table 2, param variant)".into(),
                format!("ppl(mep-param) < ppl(t5) at {l}×"),
                format!("mep-param {} vs t5 {}", r(p("mep-param", l)), r(p("t5", l))),
                verdict(lt(p("mep-param", l), p("t5", l))).into(),
            ],
            [
                "Uniform small slopes destroy extrapolation (Table 4, h ≥ 6)".into(),
                format!("ppl(2^-9 uniform) > 2 × ppl(default) at {l}× (inference-only edit)"),
                format!("{} vs {}", r(self.slope_at(3, l)), r(self.slope_at(0, l))),
                verdict(lt(self.slope_at(0, l).map(|v| 2.0 * v), self.slope_at(3, l))).into(),
            ],
            [
                "Uniform large slope (h = 2) is stable but worse than the default set (Table 4)".into(),
                format!("ppl(2^-2 uniform) > ppl(default) at 1× and ≤ 2 × its 1× value at {l}×"),
                format!(
                    "1×: {} vs {}; {l}×: {}",
                    r(self.slope_at(1, 1)),
                    r(self.slope_at(0, 1)),
                    r(self.slope_at(1, l))
                ),
                verdict(both(
                    lt(self.slope_at(0, 1), self.slope_at(1, 1)),
                    le(self.slope_at(1, l), self.slope_at(1, 1).map(|v| 2.0 * v)),
                ))
                .into(),
            ],
        ]
    }

    /// Claim rows of ReGLA: claim, test, measured, verdict.
    pub(super) fn claims_regla(&self) -> Vec<[String; 4]> {
        let r = |x: Option<f64>| x.map_or("–".to_string(), |v| num(v, 1));
        let p = |n: &str, m: usize| self.ppl_at(n, m);
        let sat = |n: &str| self.get(n).and_then(|m| m.gates_all.as_ref()).map(|g| g.saturation);
        vec![
            [
                "ReGLA beats the Fast-Decay/GLA gate (WT-103: 19.0 vs 20.8)".into(),
                "ppl(regla) < ppl(gla) at 1×".into(),
                format!("regla {} vs gla {}", r(p("regla", 1)), r(p("gla", 1))),
                verdict(lt(p("regla", 1), p("gla", 1))).into(),
            ],
            [
                "ReGLA comes close to a softmax Transformer (19.0 vs 18.5)".into(),
                "ppl(regla) ≤ 1.05 × ppl(rope) at 1×".into(),
                format!("regla {} vs rope {}", r(p("regla", 1)), r(p("rope", 1))),
                verdict(le(p("regla", 1), p("rope", 1).map(|v| 1.05 * v))).into(),
            ],
            [
                "From extreme gate init, ReGLA gates leave saturation (Fig. 4)".into(),
                "saturation(regla-fig4) < 0.5 × saturation(regla-fig4-init)".into(),
                format!("{} → {}", r3(sat("regla-fig4-init")), r3(sat("regla-fig4"))),
                verdict(lt(sat("regla-fig4"), sat("regla-fig4-init").map(|v| 0.5 * v))).into(),
            ],
            [
                "ReGLA's gates move away from the extremes more than GLA's (Fig. 4, the two compared)".into(),
                "saturation drop (init − trained) of regla-fig4 > that of gla-fig4".into(),
                format!(
                    "regla {} vs gla {}",
                    r3(sat("regla-fig4-init").zip(sat("regla-fig4")).map(|(a, b)| a - b)),
                    r3(sat("gla-fig4-init").zip(sat("gla-fig4")).map(|(a, b)| a - b))
                ),
                verdict(lt(
                    sat("gla-fig4-init").zip(sat("gla-fig4")).map(|(a, b)| a - b),
                    sat("regla-fig4-init").zip(sat("regla-fig4")).map(|(a, b)| a - b),
                ))
                .into(),
            ],
            [
                "…while GLA gates stay stuck at the extremes (Fig. 4)".into(),
                "saturation(gla-fig4) ≥ 0.5 × saturation(gla-fig4-init)".into(),
                format!("{} → {}", r3(sat("gla-fig4-init")), r3(sat("gla-fig4"))),
                verdict(le(sat("gla-fig4-init").map(|v| 0.5 * v), sat("gla-fig4"))).into(),
            ],
        ]
    }

    /// Claim rows of LRPE: claim, test, measured, verdict.
    pub(super) fn claims_lrpe(&self) -> Vec<[String; 4]> {
        let r = |x: Option<f64>| x.map_or("–".to_string(), |v| num(v, 1));
        let p = |n: &str, m: usize| self.ppl_at(n, m);
        vec![
            [
                "LRPE improves linear attention over no relative encoding (Table 2: Type 1/2 < Base)".into(),
                "ppl(lrpe) < ppl(linear-elu) at 1×".into(),
                format!("lrpe {} vs linear-elu {}", r(p("lrpe", 1)), r(p("linear-elu", 1))),
                verdict(lt(p("lrpe", 1), p("linear-elu", 1))).into(),
            ],
            [
                "Position information helps: NoPE is worse than RoPE (Table 2: 35.38 vs 33.15)".into(),
                "ppl(rope) < ppl(nope) at 1× (softmax models here)".into(),
                format!("rope {} vs nope {}", r(p("rope", 1)), r(p("nope", 1))),
                verdict(lt(p("rope", 1), p("nope", 1))).into(),
            ],
        ]
    }

    /// Claim rows of TransNormer: claim, test, measured, verdict.
    pub(super) fn claims_transnormer(&self) -> Vec<[String; 4]> {
        let r = |x: Option<f64>| x.map_or("–".to_string(), |v| num(v, 1));
        let p = |n: &str, m: usize| self.ppl_at(n, m);
        let mean_auc = |n: &str| {
            self.get(n)
                .filter(|m| !m.laa_auc.is_empty())
                .map(|m| m.laa_auc.iter().sum::<f64>() / m.laa_auc.len() as f64)
        };
        let auc = |n: &str, i: usize| self.get(n).and_then(|m| m.laa_auc.get(i).copied());
        vec![
            [
                "1+elu linear attention is diluted: less local than softmax (Fig. 2)".into(),
                "LAA AUC(linear-elu) < AUC(alibi), layer 0".into(),
                format!("{} vs {}", r3(auc("linear-elu", 0)), r3(auc("alibi", 0))),
                verdict(lt(auc("linear-elu", 0), auc("alibi", 0))).into(),
            ],
            [
                "DiagAttention restores locality in early layers (Fig. 2)".into(),
                "LAA AUC(transnormer) > AUC(linear-elu), layer 0".into(),
                format!("{} vs {}", r3(auc("transnormer", 0)), r3(auc("linear-elu", 0))),
                verdict(lt(auc("linear-elu", 0), auc("transnormer", 0))).into(),
            ],
            [
                "TransNormer beats 1+elu linear attention (Table 4: 31.01 vs 34.25)".into(),
                "ppl(transnormer) < ppl(linear-elu) at 1×".into(),
                format!("transnormer {} vs linear-elu {}", r(p("transnormer", 1)), r(p("linear-elu", 1))),
                verdict(lt(p("transnormer", 1), p("linear-elu", 1))).into(),
            ],
            [
                "…and matches vanilla softmax attention (31.01 vs 31.01)".into(),
                "ppl(transnormer) ≤ 1.05 × ppl(rope) at 1× (rope, not our weak sinusoidal model, stands for vanilla)"
                    .into(),
                format!("transnormer {} vs rope {}", r(p("transnormer", 1)), r(p("rope", 1))),
                verdict(le(p("transnormer", 1), p("rope", 1).map(|v| 1.05 * v))).into(),
            ],
            [
                "(context) mean LAA AUC over layers".into(),
                "no rule".into(),
                format!(
                    "alibi {}, linear-elu {}, transnormer {}",
                    r3(mean_auc("alibi")),
                    r3(mean_auc("linear-elu")),
                    r3(mean_auc("transnormer"))
                ),
                "–".into(),
            ],
        ]
    }
}
