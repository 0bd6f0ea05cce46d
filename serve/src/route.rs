//! Routing: matches a request's method and path against the app manifest's routes.
//!
//! A route's path is a pattern of `/`-separated segments, each a literal or a `{name}` parameter
//! that matches one non-empty segment. Path parameters and query pairs are percent-decoded here,
//! so handlers see text, never escapes. Matching is a scan over the routes: an app has a handful,
//! and a scan keeps the precedence rule obvious (a literal segment beats a parameter).

use pure_runtime::Route;

/// One segment of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

/// A route pattern, compiled once at start-up.
#[derive(Debug, Clone)]
struct Pattern {
    method: String,
    segments: Vec<Segment>,
}

/// The app's routes, in manifest order; a route is known by its index into `App::routes()`.
#[derive(Debug, Clone)]
pub struct Router {
    patterns: Vec<Pattern>,
}

/// What the router found for a method and a path.
#[derive(Debug, PartialEq, Eq)]
pub enum RouteMatch {
    /// The route's index and its decoded path parameters.
    Found {
        index: usize,
        params: Vec<(String, String)>,
    },
    /// The path is known, but not with this method; `allow` lists the methods it takes.
    MethodNotAllowed {
        allow: Vec<String>,
    },
    NotFound,
    /// A segment or query pair was not valid percent-encoded UTF-8.
    BadEncoding,
}

impl Router {
    pub fn new(routes: &[Route]) -> Router {
        let patterns = routes
            .iter()
            .map(|route| Pattern {
                method: route.method.clone(),
                segments: parse_pattern(&route.path),
            })
            .collect();
        Router { patterns }
    }

    pub fn find(&self, method: &str, path: &str) -> RouteMatch {
        let Some(raw_segments) = split_path(path) else {
            return RouteMatch::NotFound;
        };
        let mut segments = Vec::with_capacity(raw_segments.len());
        for raw in &raw_segments {
            match percent_decode(raw, false) {
                Some(text) => segments.push(text),
                None => return RouteMatch::BadEncoding,
            }
        }
        let mut best: Option<(usize, usize)> = None; // (index, number of parameters)
        let mut allow = Vec::new();
        for (index, pattern) in self.patterns.iter().enumerate() {
            let Some(param_count) = pattern.matches(&segments) else {
                continue;
            };
            if pattern.method != method {
                if !allow.contains(&pattern.method) {
                    allow.push(pattern.method.clone());
                }
                continue;
            }
            if best.is_none_or(|(_, count)| param_count < count) {
                best = Some((index, param_count));
            }
        }
        match best {
            Some((index, _)) => RouteMatch::Found {
                index,
                params: self.patterns[index].bind(&segments),
            },
            None if allow.is_empty() => RouteMatch::NotFound,
            None => RouteMatch::MethodNotAllowed { allow },
        }
    }
}

impl Pattern {
    /// The number of parameters if the pattern matches these (decoded) segments.
    fn matches(&self, segments: &[String]) -> Option<usize> {
        if segments.len() != self.segments.len() {
            return None;
        }
        let mut params = 0;
        for (pattern, segment) in self.segments.iter().zip(segments) {
            match pattern {
                Segment::Literal(text) if text == segment => {}
                Segment::Literal(_) => return None,
                Segment::Param(_) if segment.is_empty() => return None,
                Segment::Param(_) => params += 1,
            }
        }
        Some(params)
    }

    fn bind(&self, segments: &[String]) -> Vec<(String, String)> {
        self.segments
            .iter()
            .zip(segments)
            .filter_map(|(pattern, segment)| match pattern {
                Segment::Param(name) => Some((name.clone(), segment.clone())),
                Segment::Literal(_) => None,
            })
            .collect()
    }
}

fn parse_pattern(path: &str) -> Vec<Segment> {
    split_path(path)
        .unwrap_or_default()
        .into_iter()
        .map(
            |segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                // `{id:int}`: the type is the app's to check (`Route::declared`).
                Some(name) => Segment::Param(name.split(':').next().unwrap_or(name).to_string()),
                None => Segment::Literal(segment.to_string()),
            },
        )
        .collect()
}

/// Splits an absolute path into its segments; `/` alone has none. A path must start with `/`.
fn split_path(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_prefix('/')?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    Some(rest.split('/').collect())
}

/// Parses a query string into decoded pairs (`+` is a space there). A key without `=` has an
/// empty value. `None` when a pair is not valid percent-encoded UTF-8.
pub fn parse_query(query: Option<&str>) -> Option<Vec<(String, String)>> {
    let Some(query) = query else {
        return Some(Vec::new());
    };
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        pairs.push((percent_decode(key, true)?, percent_decode(value, true)?));
    }
    Some(pairs)
}

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`); `None` on a bad escape or
/// bytes that are not UTF-8.
pub fn percent_decode(text: &str, plus_is_space: bool) -> Option<String> {
    if !text.contains(['%', '+']) {
        return Some(text.to_string());
    }
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut position = 0;
    while position < bytes.len() {
        match bytes[position] {
            b'%' => {
                let high = hex_value(*bytes.get(position + 1)?)?;
                let low = hex_value(*bytes.get(position + 2)?)?;
                decoded.push(high << 4 | low);
                position += 3;
            }
            b'+' if plus_is_space => {
                decoded.push(b' ');
                position += 1;
            }
            byte => {
                decoded.push(byte);
                position += 1;
            }
        }
    }
    String::from_utf8(decoded).ok()
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pure_runtime::HandlerKind;

    fn route(method: &str, path: &str) -> Route {
        let kind = if method == "GET" {
            HandlerKind::Read
        } else {
            HandlerKind::Write
        };
        Route {
            method: method.into(),
            path: path.into(),
            handler: "h".into(),
            kind,
            declared: Default::default(),
            guard: None,
        }
    }

    fn router() -> Router {
        Router::new(&[
            route("POST", "/scores"),
            route("GET", "/players/{player}"),
            route("GET", "/players/me"),
            route("DELETE", "/players/{player}"),
            route("GET", "/"),
            route("GET", "/items/{id:int}"),
        ])
    }

    #[test]
    fn finds_literal_and_parameter_routes() {
        let router = router();
        assert_eq!(
            router.find("POST", "/scores"),
            RouteMatch::Found {
                index: 0,
                params: vec![]
            }
        );
        assert_eq!(
            router.find("GET", "/players/ann%20b"),
            RouteMatch::Found {
                index: 1,
                params: vec![("player".into(), "ann b".into())]
            }
        );
        // A typed parameter binds under its name; its type is the app's to check.
        assert_eq!(
            router.find("GET", "/items/12"),
            RouteMatch::Found {
                index: 5,
                params: vec![("id".into(), "12".into())]
            }
        );
        assert_eq!(
            router.find("GET", "/players/me"),
            RouteMatch::Found {
                index: 2,
                params: vec![]
            }
        );
        assert_eq!(
            router.find("GET", "/"),
            RouteMatch::Found {
                index: 4,
                params: vec![]
            }
        );
    }

    #[test]
    fn tells_unknown_paths_from_wrong_methods() {
        let router = router();
        assert_eq!(router.find("GET", "/nope"), RouteMatch::NotFound);
        assert_eq!(router.find("GET", "/players/"), RouteMatch::NotFound);
        assert_eq!(router.find("GET", "/players/a/b"), RouteMatch::NotFound);
        assert_eq!(router.find("GET", "/scores/"), RouteMatch::NotFound);
        assert_eq!(
            router.find("GET", "/scores"),
            RouteMatch::MethodNotAllowed {
                allow: vec!["POST".into()]
            }
        );
        assert_eq!(
            router.find("PUT", "/players/x"),
            RouteMatch::MethodNotAllowed {
                allow: vec!["GET".into(), "DELETE".into()]
            }
        );
        assert_eq!(router.find("GET", "/players/%ff"), RouteMatch::BadEncoding);
        assert_eq!(router.find("GET", "/players/%4"), RouteMatch::BadEncoding);
    }

    #[test]
    fn decodes_query_strings() {
        let pairs = parse_query(Some("n=5&name=a+b%2Bc&flag&&x=%C3%A9")).expect("valid query");
        let expected = [("n", "5"), ("name", "a b+c"), ("flag", ""), ("x", "é")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(pairs, expected);
        assert_eq!(parse_query(Some("n=%zz")), None);
        assert_eq!(parse_query(None), Some(vec![]));
    }
}
