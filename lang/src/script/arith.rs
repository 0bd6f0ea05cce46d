//! Checked integer arithmetic for scripts: `checked_add(a, b)`, `checked_sub`, `checked_mul`
//! give `()` where `+`, `-` and `*` would stop the handler with an overflow error.

use rhai::Dynamic;

/// The result, or `()` when it does not fit in 64 bits.
pub(crate) fn checked(result: Option<i64>) -> Dynamic {
    result.map_or(Dynamic::UNIT, Dynamic::from_int)
}

pub(crate) fn register(engine: &mut rhai::Engine) {
    engine.register_fn("checked_add", |a: i64, b: i64| checked(a.checked_add(b)));
    engine.register_fn("checked_sub", |a: i64, b: i64| checked(a.checked_sub(b)));
    engine.register_fn("checked_mul", |a: i64, b: i64| checked(a.checked_mul(b)));
}
