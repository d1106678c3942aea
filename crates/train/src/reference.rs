//! Gradients against the f64 reference ([`TrainModel::in_f64`]): what the parity tests and
//! `attnlab bench --train --train-accuracy` measure the f32 training paths by.

use crate::error::Result;
use crate::model::TrainModel;
use candle_core::{DType, Tensor};

/// A parameter's name and its gradient, in f64.
pub type Gradients = Vec<(String, Vec<f64>)>;

/// The mean next-token loss of `windows` (`rows` windows of `T + 1` ids, concatenated) and every
/// parameter's gradient, in f64 whatever the model's precision.
pub fn loss_and_gradients(model: &TrainModel, windows: &[u32], rows: usize) -> Result<(f64, Gradients)> {
    let batch = Tensor::from_vec(windows.to_vec(), (rows, windows.len() / rows.max(1)), model.device())?;
    let loss = model.loss(&batch)?;
    let grads = loss.backward()?;
    let mut out = Vec::new();
    for (name, var) in model.named_vars() {
        if let Some(g) = grads.get(var.as_tensor()) {
            out.push((name.to_string(), g.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?));
        }
    }
    Ok((loss.to_dtype(DType::F64)?.to_scalar::<f64>()?, out))
}

/// The worst tensor's relative L2 distance `‖got − truth‖ / ‖truth‖` and its name. The denominator
/// is floored at 1e-3 of the largest tensor gradient's norm: a gradient that is zero in exact
/// arithmetic (a constant added to a whole softmax row) is rounding noise, held to 1e-8 of the
/// largest norm instead. A tensor missing from `got` counts as all wrong (1.0).
pub fn worst_gradient_error<'a>(
    got: &[(String, Vec<f64>)],
    truth: &'a [(String, Vec<f64>)],
) -> (f64, &'a str) {
    let norm = |x: &mut dyn Iterator<Item = f64>| x.map(|v| v * v).sum::<f64>().sqrt();
    let floor = 1e-3 * truth.iter().map(|(_, g)| norm(&mut g.iter().copied())).fold(0.0, f64::max);
    let mut worst = (0.0, "");
    for (name, t) in truth {
        let rel = match got.iter().find(|(n, _)| n == name) {
            Some((_, g)) if g.len() == t.len() => {
                let diff = norm(&mut g.iter().zip(t).map(|(a, b)| a - b));
                diff / norm(&mut t.iter().copied()).max(floor).max(f64::MIN_POSITIVE)
            }
            _ => 1.0,
        };
        if rel > worst.0 {
            worst = (rel, name.as_str());
        }
    }
    worst
}
