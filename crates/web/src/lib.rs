//! yew app (placeholder).
