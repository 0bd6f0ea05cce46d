//! pure-serve's log: handlers' lines (`print`, `debug`, `warn`, `error`) and, with
//! `--access-log`, one line per request, as text or JSON lines, to standard error.
//!
//! A line is formatted on the thread that logs it and handed to a writer thread through a
//! bounded queue. When the queue is full (a terminal or pipe that reads slower than handlers
//! log) the line is dropped and counted, as production loggers do: a handler, and above all
//! the owner, never waits for a terminal.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use pure_runtime::{LogLine, LogSink};

/// Lines waiting for the writer; past this they are dropped.
pub const QUEUE_LINES: usize = 4096;
/// Room the writer leaves free in standard error's pipe, for the server's own messages (a
/// panic's report, a poisoned store's), which are written straight to it and would block
/// their thread on a full pipe: the writer waits instead (and lines are dropped meanwhile).
pub const PIPE_RESERVE_BYTES: usize = 16 << 10;

/// Bytes that can be written to the pipe `fd` without blocking; `None` when it is not a pipe.
fn pipe_room(fd: libc::c_int) -> Option<usize> {
    // SAFETY: fcntl and ioctl on a descriptor we own; FIONREAD writes one c_int.
    let (capacity, queued) = unsafe {
        let capacity = libc::fcntl(fd, libc::F_GETPIPE_SZ);
        let mut queued: libc::c_int = 0;
        let read = libc::ioctl(fd, libc::FIONREAD, &mut queued);
        (capacity, if read == 0 { queued } else { -1 })
    };
    (capacity > 0 && queued >= 0).then(|| (capacity as usize).saturating_sub(queued as usize))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `2026-12-03T11:40:00.123Z INFO app handler request-id: message`
    Text,
    /// One JSON object a line: ts, level, app, handler, request_id, message.
    Json,
}

/// One request, as the access log records it.
pub struct Access<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub duration_us: u64,
    pub request_id: &'a str,
    pub peer: &'a str,
}

pub struct Log {
    /// The app's name, as the last reload left it.
    app: ArcSwap<String>,
    format: Format,
    access: bool,
    queue: SyncSender<String>,
    /// Lines handed to the writer.
    pub lines_total: AtomicU64,
    /// Lines dropped because the writer was behind.
    pub dropped_total: AtomicU64,
    /// Lines the writer has written (or failed to write): caught up when it equals
    /// `lines_total`.
    written: Arc<AtomicU64>,
}

impl Log {
    /// A log of `app`'s lines written to standard error by a thread of its own.
    pub fn to_stderr(app: &str, format: Format, access: bool) -> Arc<Log> {
        let out = Box::new(std::io::stderr());
        Log::start(app, format, access, QUEUE_LINES, out, Some(2))
    }

    /// A log written to `out`; when `out` is the pipe `pipe_fd`, the writer leaves
    /// [`PIPE_RESERVE_BYTES`] of it free.
    pub fn start(
        app: &str,
        format: Format,
        access: bool,
        queue_lines: usize,
        mut out: Box<dyn Write + Send>,
        pipe_fd: Option<libc::c_int>,
    ) -> Arc<Log> {
        let (queue, lines) = sync_channel::<String>(queue_lines);
        let written = Arc::new(AtomicU64::new(0));
        let counter = written.clone();
        std::thread::Builder::new()
            .name("pure-log".into())
            .spawn(move || {
                for line in lines {
                    while pipe_fd
                        .and_then(pipe_room)
                        .is_some_and(|room| room < line.len() + PIPE_RESERVE_BYTES)
                    {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    // A log that cannot be written is dropped: nothing to tell it to.
                    let _ = out.write_all(line.as_bytes());
                    let _ = out.flush();
                    counter.fetch_add(1, Relaxed);
                }
            })
            .expect("spawning the log writer");
        Arc::new(Log {
            app: ArcSwap::from_pointee(app.to_string()),
            format,
            access,
            queue,
            lines_total: AtomicU64::new(0),
            dropped_total: AtomicU64::new(0),
            written,
        })
    }

    /// Waits, at most `patience`, for the writer to write what was handed to it: at a stop,
    /// so that the last lines are not lost with the process.
    pub fn drain(&self, patience: std::time::Duration) {
        let deadline = std::time::Instant::now() + patience;
        while self.written.load(Relaxed) < self.lines_total.load(Relaxed)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Names the app in the lines from now on (a reload may rename it).
    pub fn set_app(&self, app: &str) {
        self.app.store(Arc::new(app.to_string()));
    }

    pub fn access_enabled(&self) -> bool {
        self.access
    }

    fn send(&self, line: String) {
        match self.queue.try_send(line) {
            Ok(()) => {
                self.lines_total.fetch_add(1, Relaxed);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped_total.fetch_add(1, Relaxed);
            }
        }
    }

    /// Logs one request (when `--access-log` is on).
    pub fn access(&self, a: &Access<'_>) {
        if !self.access {
            return;
        }
        let ts = timestamp(SystemTime::now());
        let line = match self.format {
            Format::Text => {
                // The path is the client's: quoted, with its quotes and backslashes escaped, so
                // that no path can end the field early and pass for the fields after it.
                let mut path = String::with_capacity(a.path.len());
                escape(&mut path, a.path, true);
                format!(
                    "{ts} ACCESS {} {} \"{} {path}\" {} {}us {}\n",
                    self.app.load(),
                    a.peer,
                    a.method,
                    a.status,
                    a.duration_us,
                    a.request_id
                )
            }
            Format::Json => json_line(&serde_json::json!({
                "ts": ts, "level": "access", "app": **self.app.load(), "peer": a.peer,
                "method": a.method, "path": a.path, "status": a.status,
                "duration_us": a.duration_us, "request_id": a.request_id,
            })),
        };
        self.send(line);
    }
}

impl LogSink for Log {
    fn log(&self, line: &LogLine<'_>) {
        let ts = timestamp(SystemTime::now());
        let text = match self.format {
            Format::Text => {
                let mut text = format!(
                    "{ts} {} {} {} {}: ",
                    line.level.name().to_ascii_uppercase(),
                    self.app.load(),
                    line.handler,
                    line.request_id
                );
                escape(&mut text, line.message, false);
                text.push('\n');
                text
            }
            Format::Json => json_line(&serde_json::json!({
                "ts": ts, "level": line.level.name(), "app": **self.app.load(),
                "handler": line.handler, "request_id": line.request_id,
                "message": line.message,
            })),
        };
        self.send(text);
    }
}

/// Whether `c` could make a line of text pass for more than one, or show other than it holds:
/// control characters (`\n`, `\r`, terminal escapes, U+0085 NEXT LINE among them), the
/// Unicode line and paragraph separators (U+2028, U+2029: some viewers break lines there), and
/// the bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE shows what follows backwards).
fn forges(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Appends `text` to a text line with every character that `forges` written as `\u{hex}`
/// (`\n` and `\r` as such; a tab stays), so that the line stays one line and shows what it
/// holds. `quoted`: the text is inside quotes, and its quotes and backslashes are escaped too.
fn escape(out: &mut String, text: &str, quoted: bool) {
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push('\t'),
            '"' | '\\' if quoted => {
                out.push('\\');
                out.push(c);
            }
            c if forges(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// A JSON log line: serde_json escapes only what JSON requires, so the characters that `forges`
/// and JSON lets through (U+0085, U+2028, the bidirectional controls...) are written as
/// `\uXXXX`, which every JSON reader reads back as the same character. They can only be inside
/// strings, where that escape is valid: everything else serde_json writes is ASCII.
fn json_line(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut line = String::with_capacity(text.len() + 1);
    if text.bytes().all(|b| b < 0x7f) {
        line.push_str(&text);
    } else {
        for c in text.chars() {
            if forges(c) {
                let _ = write!(line, "\\u{:04x}", c as u32);
            } else {
                line.push(c);
            }
        }
    }
    line.push('\n');
    line
}

/// RFC 3339 in UTC with milliseconds: `2026-12-03T11:40:00.123Z`.
fn timestamp(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs() as i64;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    );
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    use pure_runtime::Level;

    use super::*;

    /// On a pipe nobody reads, the writer stops short of its last PIPE_RESERVE_BYTES: the
    /// server's own messages still fit without blocking.
    #[test]
    fn the_writer_leaves_room_in_a_full_pipe() {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (read_end, write_end) = (fds[0], fds[1]);
        // SAFETY: the write end is ours and owned by this File alone.
        let out = unsafe { std::fs::File::from_raw_fd(write_end) };
        let capacity = pipe_room(write_end).expect("a pipe");
        let log = Log::start(
            "app",
            Format::Text,
            false,
            1024,
            Box::new(out),
            Some(write_end),
        );
        let message = "x".repeat(1000);
        for _ in 0..200 {
            log.log(&LogLine {
                level: Level::Info,
                handler: "h",
                request_id: "r",
                message: &message,
            });
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let room = pipe_room(write_end).expect("a pipe");
            assert!(room >= PIPE_RESERVE_BYTES, "{room} bytes left");
            if room <= PIPE_RESERVE_BYTES + 2048 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{room} of {capacity} left"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: the read end is ours.
        unsafe { libc::close(read_end) };
    }

    #[test]
    fn timestamps_are_rfc_3339_in_utc() {
        let at = |s: u64, ms: u64| timestamp(UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(1_700_000_000, 123), "2023-11-14T22:13:20.123Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(4_102_444_799, 999), "2099-12-31T23:59:59.999Z");
    }

    /// Whether the gate is open, and what was written through it.
    type Held = Mutex<(bool, Vec<u8>)>;

    /// A writer that holds every write until it is opened, then records them.
    #[derive(Clone, Default)]
    struct Gate(Arc<(Held, Condvar)>);
    impl Write for Gate {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let (lock, open) = &*self.0;
            let mut state = open.wait_while(lock.lock().unwrap(), |s| !s.0).unwrap();
            state.1.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A writer that does not keep up never holds up the thread that logs: lines past the queue
    /// are dropped and counted, and every line is either written or counted as dropped.
    #[test]
    fn a_stuck_writer_drops_lines_and_never_blocks_the_logger() {
        let gate = Gate::default();
        let log = Log::start("app", Format::Text, false, 8, Box::new(gate.clone()), None);
        for i in 0..100 {
            log.log(&LogLine {
                level: Level::Info,
                handler: "h",
                request_id: "r",
                message: &format!("line {i}"),
            });
        }
        let dropped = log.dropped_total.load(Relaxed);
        assert!(
            dropped >= 100 - 9,
            "{dropped} dropped: at most the queue and one in hand"
        );
        assert_eq!(log.lines_total.load(Relaxed) + dropped, 100);
        let (lock, open) = &*gate.0;
        lock.lock().unwrap().0 = true;
        open.notify_all();
        let written = log.lines_total.load(Relaxed) as usize;
        drop(log);
        // The writer ends once the log is gone and its queue drained.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let text = String::from_utf8(lock.lock().unwrap().1.clone()).unwrap();
            if text.lines().count() == written {
                assert!(text.starts_with("20"), "{text}");
                assert!(text.contains(" INFO app h r: line 0\n"), "{text}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "written: {text}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn json_lines_hold_every_field_and_text_lines_stay_one_line() {
        let gate = Gate::default();
        gate.0 .0.lock().unwrap().0 = true;
        for format in [Format::Json, Format::Text] {
            let log = Log::start("app", format, true, 8, Box::new(gate.clone()), None);
            log.log(&LogLine {
                level: Level::Warn,
                handler: "h",
                request_id: "r-1",
                message: "two\nlines\u{b}\u{1b}[31m",
            });
            log.access(&Access {
                method: "POST",
                path: "/x",
                status: 201,
                duration_us: 42,
                request_id: "r-1",
                peer: "127.0.0.1",
            });
            assert_eq!(log.lines_total.load(Relaxed), 2);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let text = loop {
            let text = String::from_utf8(gate.0 .0.lock().unwrap().1.clone()).unwrap();
            if text.lines().count() == 4 {
                break text;
            }
            assert!(std::time::Instant::now() < deadline, "written: {text}");
            std::thread::sleep(Duration::from_millis(5));
        };
        let lines: Vec<&str> = text.lines().collect();
        let json: Vec<serde_json::Value> = lines
            .iter()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(json.len(), 2, "{text}");
        let line = json
            .iter()
            .find(|j| j["level"] == "warn")
            .expect("the warn line");
        assert_eq!(
            (
                &line["app"],
                &line["handler"],
                &line["request_id"],
                &line["message"]
            ),
            (
                &serde_json::json!("app"),
                &serde_json::json!("h"),
                &serde_json::json!("r-1"),
                &serde_json::json!("two\nlines\u{b}\u{1b}[31m")
            )
        );
        let access = json
            .iter()
            .find(|j| j["level"] == "access")
            .expect("access");
        assert_eq!(access["status"], 201);
        assert_eq!(access["duration_us"], 42);
        assert!(
            text.contains(" WARN app h r-1: two\\nlines\\u{b}\\u{1b}[31m\n"),
            "{text}"
        );
        assert!(
            text.contains(" ACCESS app 127.0.0.1 \"POST /x\" 201 42us r-1\n"),
            "{text}"
        );
    }

    /// The issue's forged lines: a handler's message or a request's path holding U+2028,
    /// U+2029, U+0085, U+202E or a quote. In text each is escaped (the path's quote and
    /// backslash too), in JSON each is a `\uXXXX` that reads back as itself: no raw one reaches
    /// the log, and each line stays one line.
    #[test]
    fn no_message_or_path_can_forge_a_line_in_either_format() {
        let forged = "a\u{2028}b\u{2029}c\u{85}d\u{202e}e\u{7f}f";
        let path = format!("/accounts/1\"_200_1us_forged-id\\{forged}");
        let gate = Gate::default();
        gate.0 .0.lock().unwrap().0 = true;
        for format in [Format::Text, Format::Json] {
            let log = Log::start("app", format, true, 8, Box::new(gate.clone()), None);
            log.log(&LogLine {
                level: Level::Info,
                handler: "h",
                request_id: "r",
                message: forged,
            });
            log.access(&Access {
                method: "GET",
                path: &path,
                status: 400,
                duration_us: 1,
                request_id: "r",
                peer: "127.0.0.1",
            });
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let text = loop {
            let text = String::from_utf8(gate.0 .0.lock().unwrap().1.clone()).unwrap();
            if text.matches('\n').count() == 4 {
                break text;
            }
            assert!(std::time::Instant::now() < deadline, "written: {text}");
            std::thread::sleep(Duration::from_millis(5));
        };
        for raw in ['\u{2028}', '\u{2029}', '\u{85}', '\u{202e}', '\u{7f}'] {
            assert!(!text.contains(raw), "{:x} raw in {text:?}", raw as u32);
        }
        let escaped = "a\\u{2028}b\\u{2029}c\\u{85}d\\u{202e}e\\u{7f}f";
        assert!(
            text.contains(&format!(" INFO app h r: {escaped}\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                " \"GET /accounts/1\\\"_200_1us_forged-id\\\\{escaped}\" 400 1us r\n"
            )),
            "{text}"
        );
        let json: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(json.len(), 2, "{text}");
        assert_eq!(json[0]["message"], forged);
        assert_eq!(json[1]["path"], path.as_str());
    }
}
