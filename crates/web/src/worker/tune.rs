//! The fine-tune panel's training in the worker: steps on WebGPU or the CPU through
//! `crate::tuner`, each reported to the page; the model after the last finished step becomes the
//! page's model.

use std::cell::Cell;
use std::rc::Rc;

use attnlab_train::finetune::TuneOptions;
use wasm_bindgen_futures::spawn_local;

use super::{post, set_loaded, Shared};
use crate::backend::{Active, Probe};
use crate::engine::Engine;
use crate::global::now_ms;
use crate::protocol::{FromWorker, ModelId, TuneEvent, TuneSetup, TuneSummary, Tuned};
use crate::tuner::RemoteTuner;
use crate::yield_now::yield_now;

/// Fine-tune `tune`: train the trained page model `of` on `text` a step at a time (yielding between
/// steps, so Stop and the page's other requests are heard), then make the model after the last
/// finished step the page's model, unless another model became the page's model meanwhile.
pub(super) fn tune_run(shared: &Shared, tune: u32, of: ModelId, text: String, options: TuneOptions) {
    let events = move |event| post(&FromWorker::Tune { tune, event });
    let (engine, stop, gpu) = {
        let mut s = shared.borrow_mut();
        let Some(trained) = s.trained.clone().filter(|t| t.id == of) else {
            return events(TuneEvent::Finished(Err("that model is no longer loaded".to_string())));
        };
        let stop = Rc::new(Cell::new(false));
        s.tunes.insert(tune, stop.clone());
        // Training runs where generation does (the backend choice, or Auto's measurement), named
        // by the adapter the page's probe found.
        let gpu = match (&s.backend.probe, s.backend.active()) {
            (Probe::Ready { adapter }, Active::Gpu) => Some(adapter.clone()),
            _ => None,
        };
        (trained.engine, stop, gpu)
    };
    let shared = shared.clone();
    spawn_local(async move {
        let result = match tune_steps(&engine, &text, &options, gpu, &stop, &events).await {
            Ok(_) if shared.borrow().trained.as_ref().map(|t| t.id) != Some(of) => {
                Err("another model was loaded meanwhile; the fine-tuned model was dropped".to_string())
            }
            Ok((tuned, summary)) => Ok(Box::new(Tuned { meta: set_loaded(&shared, tuned), summary })),
            Err(e) => Err(e),
        };
        shared.borrow_mut().tunes.remove(&tune);
        events(TuneEvent::Finished(result));
    });
}

/// The steps of a fine-tune (in the fine-tune module, `crate::tuner`; on WebGPU with `gpu`, else or
/// when WebGPU refuses the model, on the CPU), each reported; returns the engine of the model after
/// the last finished step. A failing step ends training with the steps before it kept.
async fn tune_steps(
    engine: &Engine,
    text: &str,
    options: &TuneOptions,
    gpu: Option<String>,
    stop: &Cell<bool>,
    events: &dyn Fn(TuneEvent),
) -> Result<(Engine, TuneSummary), String> {
    let tokens = engine.encode(text)?;
    let (config, weights) = engine.model_files()?;
    let tuner = match gpu {
        Some(adapter) => match RemoteTuner::new(&config, &weights, &tokens, options, true).await {
            Ok(mut t) => {
                t.device = format!("WebGPU · {adapter}");
                t
            }
            Err(why) => {
                let mut t = RemoteTuner::new(&config, &weights, &tokens, options, false).await?;
                t.device = format!("the CPU (wasm; WebGPU: {why})");
                t
            }
        },
        None => RemoteTuner::new(&config, &weights, &tokens, options, false).await?,
    };
    let loss_before = tuner.text_loss().await?;
    let (seq_len, params) = (tuner.seq_len()?, engine.info().params);
    let steps = options.steps;
    let device = tuner.device.clone();
    events(TuneEvent::Started(TuneSetup {
        device,
        tokens: tokens.len(),
        seq_len,
        steps,
        params,
        loss_before,
    }));
    yield_now().await;
    let (mut note, mut busy_ms, mut done) = (None, 0.0, 0);
    while !tuner.finished()? && !stop.get() {
        let t0 = now_ms();
        match tuner.step().await {
            Ok(step) => {
                let ms = now_ms() - t0;
                (busy_ms, done) = (busy_ms + ms, step.step);
                events(TuneEvent::Step { step, ms });
            }
            Err(e) => {
                note = Some(e);
                break;
            }
        }
        yield_now().await;
    }
    let loss_after = tuner.text_loss().await?;
    let tuned = engine.with_weights(&tuner.weights().await?)?;
    let tokens_per_s = (done * options.batch * seq_len) as f64 * 1000.0 / busy_ms.max(1e-3);
    let summary =
        TuneSummary { steps: done, stopped: done < steps, note, loss_before, loss_after, tokens_per_s };
    Ok((tuned, summary))
}
