//! What a web page may do to a Pure server: the `Host` a request names (`--allowed-hosts`) and
//! the `Origin` a browser sends with a write.
//!
//! A browser lets any page send a POST to any address without asking first (a form, or
//! `fetch` with `text/plain`), and Pure reads every body as JSON whatever its type. Two checks
//! stand between such a page and the state, both before routing:
//!
//! - **Host.** A page that points its own name at this server's address (DNS rebinding) is
//!   same-origin with it as far as the browser knows, so it could read answers as well as
//!   write. Its requests still carry its own name in `Host`, which the server refuses (421)
//!   unless it is one the server answers to.
//! - **Origin.** A browser sends `Origin` with every cross-site POST, whatever its content
//!   type; curl and server-side clients send none. A write that carries one is refused (403)
//!   unless it is the server's own origin (`http://` and the request's `Host`, checked above)
//!   or one the app's `"cors"` lets use that method. Reads are left alone: the browser keeps
//!   their answers from a page that `"cors"` does not allow.

use std::borrow::Cow;
use std::net::{Ipv6Addr, SocketAddr};

use hyper::header::{HeaderMap, HeaderValue, HOST, ORIGIN};
use hyper::{Method, StatusCode};
use pure_runtime::Cors;
use serde_json::json;

use crate::dispatch::{json_reply, Reply};

/// The hosts an address answers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any `Host` (`--allowed-hosts '*'`, or a non-loopback address without the option).
    Any,
    /// Host names in lower case, IPv6 addresses in brackets; any port.
    Only(Vec<String>),
}

/// What a loopback address answers to without `--allowed-hosts`: the names a browser on this
/// machine reaches it by.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl AllowedHosts {
    /// The hosts `bound` answers to: `given` (`--allowed-hosts`), or by default the loopback
    /// names on a loopback address and any host elsewhere.
    pub fn for_address(given: Option<&[String]>, bound: SocketAddr) -> AllowedHosts {
        match given {
            Some(hosts) if hosts.iter().any(|h| h == "*") => AllowedHosts::Any,
            Some(hosts) => AllowedHosts::Only(hosts.to_vec()),
            None if bound.ip().is_loopback() => {
                AllowedHosts::Only(LOOPBACK_HOSTS.map(String::from).to_vec())
            }
            None => AllowedHosts::Any,
        }
    }

    /// Whether a `Host` value (or a target's authority) names an allowed host, whatever its
    /// port.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            AllowedHosts::Any => true,
            AllowedHosts::Only(hosts) => {
                let name = host_name(host);
                hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
            }
        }
    }
}

/// What start-up says of an address that answers any host because nobody said otherwise.
pub fn any_host_note(given: Option<&[String]>, bound: SocketAddr) -> Option<String> {
    (given.is_none() && !bound.ip().is_loopback()).then(|| {
        format!(
            "pure-serve: {bound} is not a loopback address, so requests naming any host are \
             answered: give --allowed-hosts with the names clients use, or a web page that \
             points its own name at this address (DNS rebinding) can read and write through \
             its visitors' browsers"
        )
    })
}

/// One entry of `--allowed-hosts`, as clap parses it: a host name or IP address without a port,
/// or `*`.
pub fn parse_allowed_host(text: &str) -> Result<String, String> {
    let host = text.trim().to_ascii_lowercase();
    if host == "*" {
        return Ok(host);
    }
    // An IPv6 address is written in brackets in Host; accept it either way.
    let host = if host.parse::<Ipv6Addr>().is_ok() {
        format!("[{host}]")
    } else {
        host
    };
    let well_formed = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(address) => address.parse::<Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        }
    };
    if !well_formed {
        return Err(format!(
            "{text:?} is not a host name or IP address without a port (any port is allowed): \
             e.g. --allowed-hosts example.com,10.0.0.5,[::1]"
        ));
    }
    Ok(host)
}

/// The host of a `Host` value without its port: `[::1]:8080` is `[::1]`, `a.example:80` is
/// `a.example`.
fn host_name(host: &str) -> &str {
    // A byte loop: hosts are a few bytes, shorter than `str::find`'s set-up.
    let bytes = host.as_bytes();
    let end = match bytes.first() {
        Some(b'[') => bytes.iter().position(|&b| b == b']').map(|at| at + 1),
        _ => bytes.iter().position(|&b| b == b':'),
    };
    end.map_or(host, |end| &host[..end])
}

/// The 421 for a request that names a host `allowed` does not hold: the `Host` header, or the
/// authority of an absolute target (which a server must use instead of `Host`, RFC 9112
/// 3.2.2), so both are checked. `None` when both are allowed or absent.
pub fn misdirected<B>(request: &hyper::Request<B>, allowed: &AllowedHosts) -> Option<Reply> {
    if *allowed == AllowedHosts::Any {
        return None;
    }
    let header = request.headers().get(HOST).map(header_text);
    let authority = request.uri().authority().map(|a| Cow::Borrowed(a.as_str()));
    let host = [header, authority]
        .into_iter()
        .flatten()
        .find(|host| !allowed.allows(host))?;
    let AllowedHosts::Only(hosts) = allowed else {
        unreachable!("Any allows every host");
    };
    let message = format!(
        "this server does not answer to the host {host:?}: it answers to {} (any port). If \
         clients reach it by that name, start pure-serve with --allowed-hosts {},{} (or '*' \
         for any host)",
        hosts.join(", "),
        hosts.join(","),
        host_name(&host)
    );
    Some(json_reply(
        StatusCode::MISDIRECTED_REQUEST,
        &json!({ "error": message, "status": 421, "host": host }),
    ))
}

/// The 403 for a write that a browser sent for a page on another origin: one with an `Origin`
/// that is neither the server's own (`http://` and the request's `Host`) nor one `cors` lets
/// use this method. `cors` is `None` where the app's "cors" does not apply (the built-in
/// endpoints, the admin address). `None` for a read, or a request without `Origin`.
pub fn foreign_write(method: &Method, headers: &HeaderMap, cors: Option<&Cors>) -> Option<Reply> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let host = headers.get(HOST).map(HeaderValue::as_bytes);
    let origin = headers
        .get_all(ORIGIN)
        .iter()
        .map(header_text)
        .find(|origin| {
            let own = host.is_some_and(|host| is_own_origin(origin.as_bytes(), host));
            let allowed = cors.is_some_and(|cors| {
                cors.allows(origin) && cors.methods.iter().any(|m| m == method.as_str())
            });
            !own && !allowed
        })?;
    let page = match origin.as_ref() {
        "null" => "a page without an origin of its own (Origin: null: a sandboxed frame, a local \
                   file, a redirect)"
            .to_string(),
        _ => format!("a page on {origin}"),
    };
    let why = match cors {
        None => "only the server's own pages may write here".to_string(),
        Some(cors) if cors.allows(&origin) => format!(
            "the app's \"cors\" lets other origins use only {}; add {method} to \
             \"cors\".\"methods\" in app.json to allow it",
            cors.methods.join(", ")
        ),
        Some(_) => format!(
            "the app's \"cors\" does not list this origin; add {origin:?} to \
             \"cors\".\"origins\" in app.json to let such pages write"
        ),
    };
    let message = format!(
        "a {method} from {page} is refused: a browser sent it for a page on another origin, and \
         {why}"
    );
    Some(json_reply(
        StatusCode::FORBIDDEN,
        &json!({ "error": message, "status": 403, "origin": origin }),
    ))
}

/// Whether `origin` is `http://` and `host`, in any case: the server's own pages.
fn is_own_origin(origin: &[u8], host: &[u8]) -> bool {
    const SCHEME: &[u8] = b"http://";
    origin.len() == SCHEME.len() + host.len()
        && origin[..SCHEME.len()].eq_ignore_ascii_case(SCHEME)
        && origin[SCHEME.len()..].eq_ignore_ascii_case(host)
}

fn header_text(value: &HeaderValue) -> Cow<'_, str> {
    // Visible ASCII, nearly always: `to_str` checks that faster than a lossy decoding.
    match value.to_str() {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(value.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_by_name_whatever_the_port_and_case() {
        let loopback = AllowedHosts::for_address(None, "127.0.0.1:8080".parse().unwrap());
        for host in [
            "localhost",
            "LocalHost:8080",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:80",
        ] {
            assert!(loopback.allows(host), "{host}");
        }
        for host in [
            "evil.example",
            "localhost.evil.example",
            "127.0.0.2",
            "[::2]",
            "",
        ] {
            assert!(!loopback.allows(host), "{host}");
        }
        let v6 = AllowedHosts::for_address(None, "[::1]:0".parse().unwrap());
        assert_eq!(v6, loopback);
        let any = AllowedHosts::for_address(None, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(any, AllowedHosts::Any);
        let given = ["api.example".to_string()];
        let only = AllowedHosts::for_address(Some(&given), "0.0.0.0:80".parse().unwrap());
        assert!(only.allows("API.example:443") && !only.allows("localhost"));
        let star = ["a".to_string(), "*".to_string()];
        let star = AllowedHosts::for_address(Some(&star), "127.0.0.1:80".parse().unwrap());
        assert_eq!(star, AllowedHosts::Any);
    }

    #[test]
    fn allowed_hosts_are_names_or_addresses_without_a_port() {
        assert_eq!(parse_allowed_host("Example.COM"), Ok("example.com".into()));
        assert_eq!(parse_allowed_host("::1"), Ok("[::1]".into()));
        assert_eq!(parse_allowed_host("[::1]"), Ok("[::1]".into()));
        assert_eq!(parse_allowed_host("*"), Ok("*".into()));
        for bad in [
            "",
            "a.example:80",
            "[::1]:80",
            "http://a.example",
            "a/b",
            "a b",
        ] {
            let error = parse_allowed_host(bad).expect_err(bad);
            assert!(error.contains("without a port"), "{bad}: {error}");
        }
    }
}
