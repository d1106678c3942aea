//! Every load and run path returns a typed error naming the problem (issue 2, "Bad input").

mod common;
use attnlab_core::weights::{StorageDtype, Weights};
use attnlab_core::{model::tensor_specs, Error, Model, ModelConfig};
use common::*;

/// The error of a call that must fail (without printing a whole model on success).
fn expect_err<T>(r: attnlab_core::Result<T>) -> Error {
    match r {
        Ok(_) => panic!("expected an error, got Ok"),
        Err(e) => e,
    }
}

fn files(id: &str) -> (String, Vec<u8>, Model) {
    let cfg = ModelConfig::preset(id, tiny()).unwrap();
    let m = model(&cfg, 1);
    (cfg.to_json(), m.weights().to_safetensors(None).unwrap(), m)
}

#[test]
fn round_trip_through_bytes_is_exact() {
    let (json, bytes, m) = files("kerple-log");
    let back = Model::from_bytes(&json, &bytes).unwrap();
    let t = tokens(20, 61, 1);
    assert_eq!(m.session().prefill_all(&t).unwrap(), back.session().prefill_all(&t).unwrap());
}

#[test]
fn truncated_and_corrupt_safetensors() {
    let (json, bytes, _) = files("alibi");
    for cut in [0, 3, 8, 20, bytes.len() / 2, bytes.len() - 1] {
        let err = expect_err(Model::from_bytes(&json, &bytes[..cut]));
        assert!(matches!(err, Error::SafetensorsParse(_)), "cut {cut}: {err}");
    }
    let mut garbage = bytes.clone();
    garbage[8..40].fill(b'{');
    assert!(matches!(expect_err(Model::from_bytes(&json, &garbage)), Error::SafetensorsParse(_)));
}

#[test]
fn missing_extra_wrong_shape_wrong_dtype_and_nan_tensors() {
    let cfg = ModelConfig::preset("regla", tiny()).unwrap();
    let json = cfg.to_json();
    let m = model(&cfg, 2);
    let specs = tensor_specs(&cfg);

    let mut w = m.weights().clone();
    w.tensors.remove("layers.1.attn.regla.b_r");
    let err = expect_err(Model::from_bytes(&json, &w.to_safetensors(None).unwrap()));
    assert!(matches!(err, Error::MissingTensor(ref n) if n == "layers.1.attn.regla.b_r"), "{err}");

    let mut w = m.weights().clone();
    w.tensors.insert("layers.0.attn.mystery".into(), attnlab_core::weights::Tensor::f32(vec![1], vec![0.0]));
    let err = expect_err(Model::from_bytes(&json, &w.to_safetensors(None).unwrap()));
    assert!(matches!(err, Error::ExtraTensor(ref n) if n == "layers.0.attn.mystery"), "{err}");

    let mut w = m.weights().clone();
    let t = w.tensors.get_mut("layers.0.ffn.w_up").unwrap();
    t.shape = vec![t.shape[1], t.shape[0]];
    let err = expect_err(Model::from_bytes(&json, &w.to_safetensors(None).unwrap()));
    assert!(matches!(err, Error::TensorShape { ref name, .. } if name == "layers.0.ffn.w_up"), "{err}");

    let mut w = m.weights().clone();
    w.tensors.get_mut("layers.1.ffn.w_up").unwrap().data.f32_mut()[17] = f32::NAN;
    let err = expect_err(Model::from_bytes(&json, &w.to_safetensors(None).unwrap()));
    assert!(matches!(err, Error::NonFinite { ref name, index: 17 } if name == "layers.1.ffn.w_up"), "{err}");

    // An F64 tensor: the format stores F32, F16 or BF16 only.
    let mut views = Vec::new();
    let raw: Vec<(String, Vec<usize>, Vec<u8>)> = m
        .weights()
        .tensors
        .iter()
        .map(|(n, t)| {
            if n == "final_norm.weight" {
                (n.clone(), t.shape.clone(), vec![0u8; t.data.len() * 8])
            } else {
                (n.clone(), t.shape.clone(), t.data.to_f32().iter().flat_map(|v| v.to_le_bytes()).collect())
            }
        })
        .collect();
    for (n, s, d) in &raw {
        let dt = if n == "final_norm.weight" { safetensors::Dtype::F64 } else { safetensors::Dtype::F32 };
        views.push((n.clone(), safetensors::tensor::TensorView::new(dt, s.clone(), d).unwrap()));
    }
    let bytes = safetensors::serialize(views, &None).unwrap();
    let err = expect_err(Model::from_bytes(&json, &bytes));
    assert!(matches!(err, Error::TensorDtype { ref name, .. } if name == "final_norm.weight"), "{err}");
    assert!(err.to_string().contains("F32, F16 or BF16"), "{err}");
    assert!(Weights::from_safetensors(&m.weights().to_safetensors(None).unwrap(), &specs).is_ok());
}

/// F16 and BF16 storage (the shipped models are F16): every value comes back within the dtype's
/// rounding (relative 2⁻¹¹ / 2⁻⁸ for normal values), and a value beyond F16's range is refused by name
/// at save time instead of becoming inf.
#[test]
fn half_precision_storage_round_trips_and_refuses_overflow() {
    let (_, _, m) = files("regla");
    let specs = tensor_specs(m.config());
    for (dtype, rel) in [(StorageDtype::F16, 1.0 / 2048.0), (StorageDtype::Bf16, 1.0 / 256.0)] {
        let bytes = m.weights().to_safetensors_as(dtype, None).unwrap();
        assert!(bytes.len() < m.weights().to_safetensors(None).unwrap().len() * 6 / 10);
        let back = Weights::from_safetensors(&bytes, &specs).unwrap();
        for (name, t) in &m.weights().tensors {
            for (a, b) in t.data.to_f32().iter().zip(back.tensors[name].data.to_f32().iter()) {
                // F16 subnormals (|v| < 6.1e-5) round absolutely; allow that floor.
                assert!((a - b).abs() <= rel * a.abs() + 6e-8, "{dtype:?} {name}: {a} -> {b}");
            }
        }
    }
    let mut w = m.weights().clone();
    w.tensors.get_mut("final_norm.weight").unwrap().data.f32_mut()[3] = 1.0e5;
    let err = w.to_safetensors_as(StorageDtype::F16, None).unwrap_err();
    assert!(matches!(err, Error::NonFinite { ref name, index: 3 } if name == "final_norm.weight"), "{err}");
    assert!(w.to_safetensors_as(StorageDtype::Bf16, None).is_ok());
    assert!(StorageDtype::parse("F16").is_ok() && StorageDtype::parse("f8").is_err());
}

#[test]
fn bad_config_text() {
    let (json, bytes, _) = files("alibi");
    let unknown = json.replacen("\"alibi\"", "\"alibi-xl\"", 1);
    assert!(
        matches!(expect_err(Model::from_bytes(&unknown, &bytes)), Error::UnknownVariant(ref v) if v == "alibi-xl")
    );
    assert!(matches!(expect_err(Model::from_bytes("{", &bytes)), Error::ConfigParse(_)));
    let bad = json.replacen("\"d_model\": 32", "\"d_model\": 0", 1);
    let err = expect_err(Model::from_bytes(&bad, &bytes));
    assert!(err.to_string().contains("d_model"), "{err}");
    let extra = json.replacen("{", "{\"surprise\": 1,", 1);
    assert!(expect_err(Model::from_bytes(&extra, &bytes)).to_string().contains("surprise"));
}

#[test]
fn runtime_inputs() {
    let (_, _, m) = files("regla");
    assert!(matches!(expect_err(m.session().prefill(&[])), Error::EmptyPrompt));
    assert!(matches!(expect_err(m.session().prefill(&[61])), Error::TokenOutOfRange { id: 61, vocab: 61 }));
    let long = tokens(201, 61, 1);
    assert!(matches!(
        expect_err(m.session().prefill(&long)),
        Error::ContextTooLong { requested: 201, max: 200 }
    ));
    let mut s = m.session();
    s.prefill(&tokens(200, 61, 1)).unwrap();
    assert!(matches!(expect_err(s.step(1)), Error::ContextTooLong { .. }));
    // The session is still usable for reading after the refusal.
    assert_eq!(s.len(), 200);
}
