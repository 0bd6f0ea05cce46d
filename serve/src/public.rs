//! Static files: an app directory's `public/` folder, served at the root of the app's URL
//! space, so that one directory deploys a whole app, its page included.
//!
//! `GET /` and `GET /index.html` answer `public/index.html`, `GET /js/app.js` answers
//! `public/js/app.js`, and a path that ends in `/` answers that folder's `index.html`. Only a
//! GET or HEAD that no declared route matches comes here (a route wins over a file, also one of
//! another method: that is a 405). Never served: a path outside the folder (`..` segments, or a
//! symbolic link that leads out), a name that starts with `.`, a folder itself (no listing), a
//! file past `FILE_BYTES_MAX`. Each answer carries a content type from the file's extension, an
//! `ETag` from its length and modification time, and `Cache-Control: no-cache`, so a browser
//! asks again each time and gets 304 when the file did not change (`If-None-Match`).
//!
//! It knows nothing of the app's routes or scripts: only a folder and a path.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use hyper::{Response, StatusCode};

use crate::answer::AnswerBody;
use crate::dispatch::Reply;
use crate::route::percent_decode;

/// The largest file served. A file is read whole for each answer (and held, like any large
/// answer, within --answer-budget); a larger one is an app's mistake, answered 500 with its
/// name.
pub const FILE_BYTES_MAX: u64 = 16 << 20;

/// The chunks an answer's bytes are given to hyper in (see `answer.rs`).
const CHUNK: usize = pure_lang::JSON_CHUNK;

/// An app directory's `public/` folder (which need not exist).
pub struct Public {
    root: PathBuf,
}

impl Public {
    pub fn new(app_dir: &Path) -> Public {
        Public {
            root: app_dir.join("public"),
        }
    }

    /// The answer to a GET (or HEAD) of `path` from the folder, if it holds such a file.
    pub async fn answer(&self, path: &str, headers: &HeaderMap) -> Option<Reply> {
        let relative = relative_path(path)?;
        let root = tokio::fs::canonicalize(&self.root).await.ok()?;
        let file = tokio::fs::canonicalize(root.join(relative)).await.ok()?;
        // A symbolic link inside the folder may lead anywhere: only what lies inside is served.
        if !file.starts_with(&root) {
            return None;
        }
        let meta = tokio::fs::metadata(&file).await.ok()?;
        if !meta.is_file() {
            return None;
        }
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let etag = format!("\"{:x}-{:x}\"", meta.len(), modified);
        if matches_none_match(headers, &etag) {
            let mut reply = Response::new(AnswerBody::empty());
            *reply.status_mut() = StatusCode::NOT_MODIFIED;
            set(&mut reply, ETAG, &etag);
            set(&mut reply, CACHE_CONTROL, "no-cache");
            return Some(reply);
        }
        if meta.len() > FILE_BYTES_MAX {
            let message = format!(
                "public{path} is {} bytes, more than the {} a static file may be",
                meta.len(),
                FILE_BYTES_MAX
            );
            return Some(crate::dispatch::json_reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                &serde_json::json!({ "error": message, "status": 500 }),
            ));
        }
        let bytes = Bytes::from(tokio::fs::read(&file).await.ok()?);
        let size = bytes.len() as u64;
        let body = match bytes.len() <= CHUNK {
            true => AnswerBody::whole(bytes),
            false => AnswerBody::Chunks {
                chunks: (0..bytes.len())
                    .step_by(CHUNK)
                    .map(|at| bytes.slice(at..(at + CHUNK).min(bytes.len())))
                    .collect(),
                size,
            },
        };
        let mut reply = Response::new(body);
        set(&mut reply, CONTENT_TYPE, content_type(&file));
        set(&mut reply, ETAG, &etag);
        set(&mut reply, CACHE_CONTROL, "no-cache");
        Some(reply)
    }
}

fn set(reply: &mut Reply, name: hyper::header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        reply.headers_mut().insert(name, value);
    }
}

/// The file a URL path names, relative to the folder: `None` for a path that could leave it
/// or names a hidden file. A path ending in `/` names that folder's `index.html`.
pub fn relative_path(path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(path.strip_prefix('/')?, false)?;
    let mut relative = PathBuf::new();
    let mut segments = decoded.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        if segment.is_empty() && last {
            relative.push("index.html");
            break;
        }
        let unsafe_segment = segment.is_empty()
            || segment.starts_with('.')
            || segment.contains(['\\', '\0'])
            || Path::new(segment).is_absolute();
        if unsafe_segment {
            return None;
        }
        relative.push(segment);
    }
    Some(relative)
}

/// Whether `If-None-Match` names `etag` (or is `*`), by the weak comparison RFC 9110 asks of it.
fn matches_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

/// The content type of a file, from its extension.
fn content_type(file: &Path) -> &'static str {
    let extension = file
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("csv") => "text/csv; charset=utf-8",
        Some("xml") => "application/xml",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("avif") => "image/avif",
        Some("ico") => "image/x-icon",
        Some("woff") => "font/woff",
        Some("woff2") => "font/woff2",
        Some("wasm") => "application/wasm",
        Some("pdf") => "application/pdf",
        Some("webmanifest") => "application/manifest+json",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_files_inside_the_folder_and_nothing_else() {
        let ok = |path: &str, file: &str| assert_eq!(relative_path(path), Some(file.into()));
        ok("/", "index.html");
        ok("/index.html", "index.html");
        ok("/js/app.js", "js/app.js");
        ok("/docs/", "docs/index.html");
        ok("/a%20b.txt", "a b.txt");
        for refused in [
            "",
            "/..",
            "/../app.json",
            "/js/../../app.json",
            "/%2e%2e/app.json",
            "/.env",
            "/js/.hidden",
            "//etc/passwd",
            "/a//b",
            "/a%2f..%2f..%2fapp.json",
            "/a\\..\\app.json",
            "/%00",
            "/%ff",
        ] {
            assert_eq!(relative_path(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn if_none_match_compares_weakly_and_takes_lists_and_a_star() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
            headers
        };
        let tag = "\"1a-2b\"";
        assert!(matches_none_match(&with("\"1a-2b\""), tag));
        assert!(matches_none_match(&with("W/\"1a-2b\""), tag));
        assert!(matches_none_match(&with("\"x\", \"1a-2b\""), tag));
        assert!(matches_none_match(&with("*"), tag));
        assert!(!matches_none_match(&with("\"1a-2c\""), tag));
        assert!(!matches_none_match(&HeaderMap::new(), tag));
    }
}
