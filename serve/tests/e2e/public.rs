//! An app directory's `public/` folder, served as static files at the root of its URL space: the
//! file a GET names, with its content type, ETag and 304 for `If-None-Match`; a declared route
//! wins over a file; nothing outside the folder, no hidden file, no listing.

use std::io::Write as _;
use std::path::Path;

use serde_json::json;

use crate::harness::{Client, Launch, Response};

const INDEX: &str = "<!doctype html><title>site</title><script src=\"/js/app.js\"></script>";
const SCRIPT: &str = "fetch('/count').then(r => r.json()).then(console.log);\n";

/// An app with two routes (one of them also a file's path), and a public folder.
fn site(dir: &Path) {
    let write = |relative: &str, bytes: &[u8]| {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::File::create(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    };
    write(
        "app.json",
        json!({
            "name": "site",
            "tables": { "hits": ["n"] },
            "routes": {
                "GET /count": "count",
                "POST /hit": "hit",
                "GET /declared.html": "declared"
            }
        })
        .to_string()
        .as_bytes(),
    );
    write(
        "site.rhai",
        b"fn count(req) { let r = hits.get(1); if r == () { 0 } else { r.n } }\n\
          fn hit(req) { let r = hits.get(1); let n = if r == () { 1 } else { r.n + 1 }; hits.put(1, #{ n: n }); n }\n\
          fn declared(req) { \"the route\" }\n",
    );
    write("public/index.html", INDEX.as_bytes());
    write("public/js/app.js", SCRIPT.as_bytes());
    write("public/declared.html", b"the file");
    write("public/hit", b"a file named like a POST route");
    write("public/.env", b"SECRET=1");
    write("public/docs/index.html", b"<p>docs</p>");
    write("public/docs/guide.txt", b"text");
    write("public/data.bin", &vec![7u8; 300_000]);
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response
        .header(name)
        .unwrap_or_else(|| panic!("no {name} in {response:?}"))
}

fn get_with(client: &mut Client, path: &str, extra: &str) -> Response {
    let head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n");
    client.exchange(head.as_bytes()).expect("answered")
}

#[test]
fn the_public_folder_is_served_at_the_root_with_types_and_etags() {
    let root = tempfile::tempdir().unwrap();
    let app = root.path().join("site");
    site(&app);
    let server = Launch::new(&app, &root.path().join("data")).start();
    let mut client = server.client();

    for path in ["/", "/index.html"] {
        let page = client.get(path);
        assert_eq!(page.status, 200, "{path}: {page:?}");
        assert_eq!(page.text(), INDEX);
        assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(&page, "cache-control"), "no-cache");
    }
    let script = client.get("/js/app.js");
    assert_eq!(script.status, 200);
    assert_eq!(script.text(), SCRIPT);
    assert_eq!(
        header(&script, "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(client.get("/docs/").text(), "<p>docs</p>");
    assert_eq!(
        header(&client.get("/docs/guide.txt"), "content-type"),
        "text/plain; charset=utf-8"
    );
    // A file larger than one chunk of an answer arrives whole.
    let data = client.get("/data.bin");
    assert_eq!(data.status, 200);
    assert_eq!(data.body, vec![7u8; 300_000]);
    assert_eq!(header(&data, "content-type"), "application/octet-stream");

    // The ETag: 304 while the file is the same, 200 with a new tag once it changed.
    let tag = header(&script, "etag").to_string();
    let again = get_with(
        &mut client,
        "/js/app.js",
        &format!("If-None-Match: {tag}\r\n"),
    );
    assert_eq!(again.status, 304, "{again:?}");
    assert!(again.body.is_empty());
    assert_eq!(header(&again, "etag"), tag);
    let weak = get_with(
        &mut client,
        "/js/app.js",
        &format!("If-None-Match: \"x\", W/{tag}\r\n"),
    );
    assert_eq!(weak.status, 304);
    std::fs::write(
        app.join("public/js/app.js"),
        "console.log('changed, and longer');\n",
    )
    .unwrap();
    let changed = get_with(
        &mut client,
        "/js/app.js",
        &format!("If-None-Match: {tag}\r\n"),
    );
    assert_eq!(changed.status, 200);
    assert_eq!(changed.text(), "console.log('changed, and longer');\n");
    assert_ne!(header(&changed, "etag"), tag);

    // The routes are the app's: a declared route wins over a file of its path, and a path of a
    // route of another method is that route's 405, not the file.
    let declared = client.get("/declared.html");
    assert_eq!(declared.json(), json!("the route"));
    assert_eq!(client.get("/hit").status, 405);
    assert_eq!(client.post("/hit", &json!({})).json(), json!(1));
    assert_eq!(client.get("/count").json(), json!(1));
    server.stop();
}

#[test]
fn nothing_outside_the_folder_no_hidden_file_and_no_listing_is_served() {
    let root = tempfile::tempdir().unwrap();
    let app = root.path().join("site");
    site(&app);
    std::fs::write(root.path().join("outside.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(root.path().join("outside.txt"), app.join("public/out.txt"))
        .unwrap();
    std::os::unix::fs::symlink(app.join("public/docs"), app.join("public/inside")).unwrap();
    let server = Launch::new(&app, &root.path().join("data")).start();
    let mut client = server.client();
    for path in [
        "/../app.json",
        "/js/../../app.json",
        "/%2e%2e/app.json",
        "/js/%2e%2e/%2e%2e/site.rhai",
        "/.env",
        "/out.txt",
        "/docs",
        "/js",
        "/nothing.html",
        "/..%2fapp.json",
    ] {
        let answer = client.get(path);
        assert_eq!(answer.status, 404, "{path}: {answer:?}");
        assert!(!answer.text().contains("SECRET"), "{path}");
        assert!(!answer.text().contains("outside"), "{path}");
        assert_eq!(answer.json()["status"], json!(404), "{path}");
    }
    // A link that stays inside the folder is followed.
    assert_eq!(client.get("/inside/guide.txt").text(), "text");
    server.stop();
}
