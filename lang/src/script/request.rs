//! The request a handler receives: what the HTTP layer read, in script values.

use rhai::{Dynamic, ImmutableString};

/// What a handler receives, as the Rhai map `#{params, query, body, method, path, headers,
/// peer, id, scheduled}`.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Path parameters, already percent-decoded: text, or the declared type's value.
    pub params: Vec<(String, Dynamic)>,
    /// Query string pairs, already percent-decoded: text, or the declared type's value (a
    /// declared default stands in for an absent one).
    pub query: Vec<(String, Dynamic)>,
    /// The body as script values, unit when there is none: from `App::request`, which
    /// checked it against the handlers' limits.
    pub body: Dynamic,
    /// What the HTTP layer knows of the request besides its route and body; empty strings and
    /// no headers for a request that did not come over HTTP.
    pub head: Box<Head>,
    /// For the run of a schedule entry, `#{id, due, name}` (`name` for the manifest's
    /// entries); `()` for a request.
    pub scheduled: Dynamic,
}

/// The request line, the headers, the peer and the request's id.
///
/// Script strings from the start, made on the thread that read the request, so that handing
/// them to a handler on the owner copies nothing.
#[derive(Clone, Debug, Default)]
pub struct Head {
    /// Upper case, as sent: "GET", "POST", ...
    pub method: ImmutableString,
    /// The path as sent, without the query string (still percent-encoded).
    pub path: ImmutableString,
    /// Names in lower case, each once; a repeated header's values joined in the order sent
    /// with ", " (a cookie's with "; "), as HTTP lets a recipient combine them.
    pub headers: Vec<(ImmutableString, ImmutableString)>,
    /// The peer's IP address.
    pub peer: ImmutableString,
    /// The request's id: the client's `x-request-id` when it sent a usable one, else one the
    /// server made. Sent back as `x-request-id`.
    pub id: ImmutableString,
}
