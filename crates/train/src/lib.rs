//! candle trainer (issue 3). Placeholder crate until the trainer lands.
