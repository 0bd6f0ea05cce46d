//! The error a function of Pure's script API raises on a script's mistake (a wrong argument, a
//! value too deep), as opposed to a script's own `throw`.

use rhai::{Dynamic, EvalAltResult, Position};

/// An error raised by the table API (a bug in the script, not a `throw`): becomes a 500 that
/// names the position. Scripts can still catch it with `try`/`catch`.
#[derive(Clone, Debug)]
pub struct ApiError(pub String);

/// [`ApiError`] as the error a registered function returns: Rhai adds the position of the call.
pub(crate) fn api_error(message: impl Into<String>) -> Box<EvalAltResult> {
    EvalAltResult::ErrorRuntime(Dynamic::from(ApiError(message.into())), Position::NONE).into()
}
