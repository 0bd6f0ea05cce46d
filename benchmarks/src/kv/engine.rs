//! The engines `pure-bench kv` drives, behind one interface: a [`Store`] is a database that can be
//! emptied and hands out [`Client`]s, one per benchmark thread, each doing one operation at a
//! time. Every engine is given the same operations (keys, values, batches, pages of a range), so
//! that their figures compare.
//!
//! - [`Sqlite`]: rusqlite (bundled SQLite) in this process, one connection per client, a commit
//!   per operation (per batch for a batch) under the chosen `synchronous`; writers take turns on
//!   a lock of ours, so they never meet SQLITE_BUSY and its sleeping retries.
//! - [`PureHttp`]: the kv app in a `pure-serve` started here, one keep-alive connection per
//!   client.
//! - [`PureInprocess`]: the kv app in a `pure_runtime::Runtime` in this process: the requests
//!   the server would build, without HTTP.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use pure_lang::{App, Request};
use pure_runtime::{Runtime, RuntimeOptions};
use pure_store::SyncMode;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use crate::harness::http;
use crate::harness::serve::Server;
use crate::harness::sqlite::Settings;

/// Most entries one range call returns: the kv app's largest `limit`.
pub const PAGE: usize = 1000;

/// A page of a range: the entries read (and their bytes), and where the next page starts.
pub struct Page {
    pub entries: usize,
    pub bytes: usize,
    /// Forward: the first key of the next page; reverse: the key the next page stops before.
    /// `None` at the end.
    pub next: Option<String>,
}

/// One thread's connection to the database.
pub trait Client {
    fn put(&mut self, key: &str, value: &str) -> Result<()>;
    /// The value's length, or `None` when the key is absent.
    fn get(&mut self, key: &str) -> Result<Option<usize>>;
    /// Whether the key was there.
    fn delete(&mut self, key: &str) -> Result<bool>;
    /// Every entry written in one transaction.
    fn batch(&mut self, entries: &[(String, &str)]) -> Result<()>;
    /// Up to `limit` entries with `from <= key < to` (a bound left out: no bound), in key order
    /// or from the highest key down.
    fn range(
        &mut self,
        from: Option<&str>,
        to: Option<&str>,
        reverse: bool,
        limit: usize,
    ) -> Result<Page>;
}

/// A database under test.
pub trait Store: Sync {
    /// A new client, for the calling thread.
    fn client(&self) -> Result<Box<dyn Client + '_>>;
    /// Starts again on an empty database (db_bench's fresh database for the fill benchmarks).
    fn fresh(&mut self) -> Result<()>;
    /// Closes the database cleanly.
    fn close(self: Box<Self>) -> Result<()>;
    /// The server process, when the engine is one (its CPU is counted apart from ours).
    fn server_pid(&self) -> Option<u32> {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// SQLite

/// One table, `key TEXT PRIMARY KEY, value TEXT`, WITHOUT ROWID (the entries live in the
/// primary key's B-tree, as Pure's live in one ordered map), in `dir/kv.sqlite`.
pub struct Sqlite {
    path: PathBuf,
    settings: Settings,
    /// Writers take turns here rather than in SQLite's busy handler, which sleeps.
    write_lock: Arc<Mutex<()>>,
}

impl Sqlite {
    pub fn open(dir: &Path, settings: Settings, existing: bool) -> Result<Sqlite> {
        let sqlite = Sqlite {
            path: dir.join("kv.sqlite"),
            settings,
            write_lock: Arc::new(Mutex::new(())),
        };
        if existing {
            existing_db(&sqlite.path)?;
            sqlite.connect()?;
        } else {
            sqlite.create()?;
        }
        Ok(sqlite)
    }

    fn create(&self) -> Result<()> {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let path = PathBuf::from(format!("{}{suffix}", self.path.display()));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("remove {}", path.display())),
            }
        }
        let conn = Connection::open(&self.path)
            .with_context(|| format!("create {}", self.path.display()))?;
        // The page size counts only before the first table, and not in WAL mode.
        conn.pragma_update(None, "page_size", self.settings.page_size)?;
        conn.execute_batch(
            "CREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID",
        )?;
        let page_size: u32 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
        if page_size != self.settings.page_size {
            bail!(
                "page_size={} was asked but SQLite made {page_size}",
                self.settings.page_size
            );
        }
        self.settings.apply(&conn)?;
        Ok(())
    }

    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path)
            .with_context(|| format!("open {}", self.path.display()))?;
        self.settings.apply(&conn)?;
        Ok(conn)
    }
}

impl Store for Sqlite {
    fn client(&self) -> Result<Box<dyn Client + '_>> {
        Ok(Box::new(SqliteClient {
            conn: self.connect()?,
            write_lock: &self.write_lock,
        }))
    }

    fn fresh(&mut self) -> Result<()> {
        self.create()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

struct SqliteClient<'a> {
    conn: Connection,
    write_lock: &'a Mutex<()>,
}

/// Takes the writers' turn. A writer that panicked left nothing half-done in SQLite (its
/// transaction rolls back), so a poisoned lock is taken as it is.
fn turn(lock: &Mutex<()>) -> std::sync::MutexGuard<'_, ()> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

impl Client for SqliteClient<'_> {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        let _turn = turn(self.write_lock);
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")?
            .execute(params![key, value])?;
        Ok(())
    }

    fn get(&mut self, key: &str) -> Result<Option<usize>> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT value FROM kv WHERE key = ?1")?;
        // The value is read out as the HTTP answer's would be, not just found.
        let value = statement
            .query_row([key], |row| {
                row.get_ref(0).map(|v| v.as_bytes().map(<[u8]>::len))
            })
            .optional()?;
        Ok(value.transpose()?)
    }

    fn delete(&mut self, key: &str) -> Result<bool> {
        let _turn = turn(self.write_lock);
        let changed = self
            .conn
            .prepare_cached("DELETE FROM kv WHERE key = ?1")?
            .execute([key])?;
        Ok(changed > 0)
    }

    fn batch(&mut self, entries: &[(String, &str)]) -> Result<()> {
        let _turn = turn(self.write_lock);
        let tx = self.conn.transaction()?;
        {
            let mut put =
                tx.prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")?;
            for (key, value) in entries {
                put.execute(params![key, value])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn range(
        &mut self,
        from: Option<&str>,
        to: Option<&str>,
        reverse: bool,
        limit: usize,
    ) -> Result<Page> {
        let sql = format!(
            "SELECT key, value FROM kv WHERE key >= ?1{} ORDER BY key{} LIMIT ?3",
            if to.is_some() { " AND key < ?2" } else { "" },
            if reverse { " DESC" } else { "" }
        );
        let mut statement = self.conn.prepare_cached(&sql)?;
        // Every parameter is bound: one unused is allowed when numbered. No key is below "".
        let mut rows = statement.query(params![
            from.unwrap_or(""),
            to.unwrap_or(""),
            limit as i64 + 1
        ])?;
        let mut page = Page {
            entries: 0,
            bytes: 0,
            next: None,
        };
        let mut last = String::new();
        while let Some(row) = rows.next()? {
            let key = row.get_ref(0)?.as_str()?;
            if page.entries == limit {
                page.next = Some(if reverse { last } else { key.to_string() });
                break;
            }
            let value = row.get_ref(1)?.as_bytes()?;
            page.entries += 1;
            page.bytes += key.len() + value.len();
            if reverse {
                last.clear();
                last.push_str(key);
            }
        }
        Ok(page)
    }
}

/// The page size of the SQLite database in `dir`.
pub fn sqlite_page_size(dir: &Path) -> Result<u32> {
    let path = dir.join("kv.sqlite");
    let conn = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("open {}", path.display()))?;
    Ok(conn.query_row("PRAGMA page_size", [], |row| row.get(0))?)
}

// ---------------------------------------------------------------------------------------------
// Pure over HTTP

/// The kv app in a pure-serve of ours, on `data`.
pub struct PureHttp {
    app: PathBuf,
    data: PathBuf,
    flags: Vec<String>,
    server: Option<Server>,
}

impl PureHttp {
    pub fn start(app: &Path, data: &Path, flags: Vec<String>, existing: bool) -> Result<PureHttp> {
        let mut pure = PureHttp {
            app: app.to_path_buf(),
            data: data.to_path_buf(),
            flags,
            server: None,
        };
        if existing {
            existing_db(data)?;
            pure.serve()?;
        } else {
            pure.fresh()?;
        }
        Ok(pure)
    }

    fn serve(&mut self) -> Result<()> {
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        self.server = Some(Server::start(&self.app, &self.data, &flags)?);
        Ok(())
    }

    fn address(&self) -> SocketAddr {
        self.server.as_ref().expect("serving").address
    }
}

impl Store for PureHttp {
    fn client(&self) -> Result<Box<dyn Client + '_>> {
        Ok(Box::new(HttpClient::connect(self.address())?))
    }

    fn fresh(&mut self) -> Result<()> {
        if let Some(server) = self.server.take() {
            server.stop()?;
        }
        remove_dir(&self.data)?;
        self.serve()
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        match self.server.take() {
            Some(server) => server.stop(),
            None => Ok(()),
        }
    }

    fn server_pid(&self) -> Option<u32> {
        self.server.as_ref().map(Server::pid)
    }
}

/// `--use-existing-db`'s database must be there.
fn existing_db(path: &Path) -> Result<()> {
    if !path.exists() {
        bail!(
            "--use-existing-db: {} does not exist (run a fill benchmark first)",
            path.display()
        );
    }
    Ok(())
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("empty {}", dir.display())),
    }
}

/// One keep-alive HTTP/1.1 connection. It reads answers' bodies as bytes and parses only a
/// range's (a page of entries), so that the client, which shares the machine's cores with the
/// server, spends little of them.
struct HttpClient {
    connection: http::Client,
    /// The last answer's body.
    body: Vec<u8>,
}

impl HttpClient {
    fn connect(address: SocketAddr) -> Result<HttpClient> {
        Ok(HttpClient {
            connection: http::Client::connect(address)?,
            body: Vec::new(),
        })
    }

    /// Sends a request and reads its answer's status, leaving the body in `self.body`.
    fn send(&mut self, method: &str, path: &str, body: &[u8]) -> Result<u16> {
        self.connection.exchange(method, path, body, &mut self.body)
    }

    fn expect(&self, what: &str, status: u16, expected: &[u16]) -> Result<()> {
        if expected.contains(&status) {
            return Ok(());
        }
        bail!(
            "{what}: the server answered {status} {}",
            String::from_utf8_lossy(&self.body)
        )
    }
}

impl Client for HttpClient {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        let body = value_body(value);
        let status = self.send("PUT", &format!("/kv/{key}"), &body)?;
        self.expect("PUT", status, &[204])
    }

    fn get(&mut self, key: &str) -> Result<Option<usize>> {
        let status = self.send("GET", &format!("/kv/{key}"), b"")?;
        self.expect("GET", status, &[200, 404])?;
        if status != 200 {
            return Ok(None);
        }
        // The value's length, as the other engines count it, not the whole answer's
        // (`{"key":"...","value":"..."}`): the value comes last, and the benchmark's values
        // need no escapes, so it is what lies between `"value":"` and the closing `"}`.
        const FIELD: &[u8] = b"\"value\":\"";
        match self.body.windows(FIELD.len()).rposition(|w| w == FIELD) {
            Some(at) if self.body.ends_with(b"\"}") => {
                Ok(Some(self.body.len() - (at + FIELD.len()) - 2))
            }
            _ => {
                let answer: Value = serde_json::from_slice(&self.body)?;
                Ok(Some(answer["value"].as_str().map_or(0, str::len)))
            }
        }
    }

    fn delete(&mut self, key: &str) -> Result<bool> {
        let status = self.send("DELETE", &format!("/kv/{key}"), b"")?;
        self.expect("DELETE", status, &[200])?;
        // {"deleted":true} or {"deleted":false}: no need to parse it.
        Ok(self.body.windows(4).any(|w| w == b"true"))
    }

    fn batch(&mut self, entries: &[(String, &str)]) -> Result<()> {
        let body = batch_body(entries);
        let status = self.send("POST", "/kv", &body)?;
        self.expect("POST", status, &[200])
    }

    fn range(
        &mut self,
        from: Option<&str>,
        to: Option<&str>,
        reverse: bool,
        limit: usize,
    ) -> Result<Page> {
        let mut path = format!("/kv?limit={limit}");
        if let Some(key) = from {
            path.push_str(&format!("&from={key}"));
        }
        if let Some(key) = to {
            path.push_str(&format!("&to={key}"));
        }
        if reverse {
            path.push_str("&reverse=true");
        }
        let status = self.send("GET", &path, b"")?;
        self.expect("GET /kv", status, &[200])?;
        let answer: Value = serde_json::from_slice(&self.body)?;
        page_of(&answer)
    }
}

/// Keys are digits and values letters and digits (see `super::Data`), so neither needs
/// escaping in a path or a JSON string.
fn value_body(value: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(value.len() + 16);
    body.extend_from_slice(b"{\"value\":\"");
    body.extend_from_slice(value.as_bytes());
    body.extend_from_slice(b"\"}");
    body
}

/// A batch body's length at most, for `entries` keys and values of `payload` bytes in all:
/// `{"put":{` and `}}`, and for each entry two pairs of quotes, a colon and a comma.
pub(super) fn batch_body_bytes(entries: usize, payload: usize) -> usize {
    payload + 6 * entries + 16
}

fn batch_body(entries: &[(String, &str)]) -> Vec<u8> {
    let payload: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    let mut body = Vec::with_capacity(batch_body_bytes(entries.len(), payload));
    body.extend_from_slice(b"{\"put\":{");
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.push(b'"');
        body.extend_from_slice(key.as_bytes());
        body.extend_from_slice(b"\":\"");
        body.extend_from_slice(value.as_bytes());
        body.push(b'"');
    }
    body.extend_from_slice(b"}}");
    body
}

/// A range's answer `{"entries": [{"key", "value"}, ...], "next": key or null}` as a page.
fn page_of(answer: &Value) -> Result<Page> {
    let entries = answer["entries"]
        .as_array()
        .ok_or_else(|| anyhow!("a range's answer without entries: {answer}"))?;
    let bytes = entries
        .iter()
        .map(|e| {
            let text = |field: &str| e[field].as_str().map_or(0, str::len);
            text("key") + text("value")
        })
        .sum();
    Ok(Page {
        entries: entries.len(),
        bytes,
        next: answer["next"].as_str().map(str::to_string),
    })
}

// ---------------------------------------------------------------------------------------------
// Pure in this process

/// The kv app in a runtime of ours, on `data`.
pub struct PureInprocess {
    app: PathBuf,
    data: PathBuf,
    sync: SyncMode,
    runtime: Option<Runtime>,
}

impl PureInprocess {
    pub fn open(app: &Path, data: &Path, sync: SyncMode, existing: bool) -> Result<PureInprocess> {
        let mut pure = PureInprocess {
            app: app.to_path_buf(),
            data: data.to_path_buf(),
            sync,
            runtime: None,
        };
        if existing {
            existing_db(data)?;
            pure.start()?;
        } else {
            pure.fresh()?;
        }
        Ok(pure)
    }

    fn start(&mut self) -> Result<()> {
        let app = App::load(&self.app).map_err(|e| anyhow!("{}: {e}", self.app.display()))?;
        let options = RuntimeOptions {
            sync: self.sync,
            ..RuntimeOptions::default()
        };
        let runtime = Runtime::open(app, &self.data, options).map_err(|e| anyhow!("{e}"))?;
        self.runtime = Some(runtime);
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown();
            if let Some(reason) = runtime.poisoned() {
                bail!("the runtime is poisoned: {reason}");
            }
        }
        Ok(())
    }
}

impl Store for PureInprocess {
    fn client(&self) -> Result<Box<dyn Client + '_>> {
        let runtime = self.runtime.as_ref().expect("open");
        let app = runtime.app();
        let route = |handler: &str| {
            app.routes()
                .iter()
                .position(|r| r.handler == handler)
                .ok_or_else(|| anyhow!("the app has no route to {handler}: is it apps/kv?"))
        };
        Ok(Box::new(InprocessClient {
            runtime,
            routes: [
                route("put_entry")?,
                route("get_entry")?,
                route("delete_entry")?,
                route("batch")?,
                route("range")?,
            ],
            app,
        }))
    }

    fn fresh(&mut self) -> Result<()> {
        self.stop()?;
        remove_dir(&self.data)?;
        self.start()
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.stop()
    }
}

struct InprocessClient<'a> {
    runtime: &'a Runtime,
    app: Arc<App>,
    /// The routes of put, get, remove, batch and range.
    routes: [usize; 5],
}

impl InprocessClient<'_> {
    /// The request as pure-serve builds it from what it read: the body parsed and checked
    /// against the route's declaration.
    fn request(
        &self,
        route: usize,
        key: Option<&str>,
        query: Vec<(String, String)>,
        body: &[u8],
    ) -> Result<Request> {
        let params = key
            .map(|k| vec![("key".to_string(), k.to_string())])
            .unwrap_or_default();
        self.app
            .request(route, params, query, Default::default(), body)
            .map_err(|e| anyhow!("the request is refused: {e:?}"))
    }

    fn write(&self, handler: &str, request: Request) -> Result<pure_lang::Answer> {
        let reply = self
            .runtime
            .write_on(&self.app, handler, request)
            .map_err(|e| anyhow!("{handler}: {}", e.to_json()))?;
        reply
            .blocking_recv()
            .map_err(|_| anyhow!("the runtime stopped before answering"))?
            .map_err(|e| anyhow!("{handler}: {}", e.to_json()))
    }

    fn read(&self, handler: &str, request: Request) -> Result<pure_lang::Answer> {
        self.runtime
            .read_on(&self.app, handler, request)
            .map_err(|e| anyhow!("{handler}: {}", e.to_json()))
    }
}

impl Client for InprocessClient<'_> {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        let request = self.request(self.routes[0], Some(key), Vec::new(), &value_body(value))?;
        self.write("put_entry", request)?;
        Ok(())
    }

    fn get(&mut self, key: &str) -> Result<Option<usize>> {
        let request = self.request(self.routes[1], Some(key), Vec::new(), b"")?;
        match self.runtime.read_on(&self.app, "get_entry", request) {
            Ok(answer) => Ok(Some(
                answer.body.to_value()["value"].as_str().map_or(0, str::len),
            )),
            Err(e) if e.status() == 404 => Ok(None),
            Err(e) => bail!("get: {}", e.to_json()),
        }
    }

    fn delete(&mut self, key: &str) -> Result<bool> {
        let request = self.request(self.routes[2], Some(key), Vec::new(), b"")?;
        let answer = self.write("delete_entry", request)?;
        Ok(answer.body.to_value()["deleted"] == Value::Bool(true))
    }

    fn batch(&mut self, entries: &[(String, &str)]) -> Result<()> {
        let request = self.request(self.routes[3], None, Vec::new(), &batch_body(entries))?;
        self.write("batch", request)?;
        Ok(())
    }

    fn range(
        &mut self,
        from: Option<&str>,
        to: Option<&str>,
        reverse: bool,
        limit: usize,
    ) -> Result<Page> {
        let mut query = vec![("limit".to_string(), limit.to_string())];
        for (name, bound) in [("from", from), ("to", to)] {
            if let Some(key) = bound {
                query.push((name.to_string(), key.to_string()));
            }
        }
        if reverse {
            query.push(("reverse".to_string(), "true".to_string()));
        }
        let request = self.request(self.routes[4], None, query, b"")?;
        page_of(&self.read("range", request)?.body.to_value())
    }
}
