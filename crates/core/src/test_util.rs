//! Helpers shared by the unit tests of this crate.

/// `|a − b| <= tol`.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}
