//! The command line: every option pure-serve takes, its default, and what it protects.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "\
Handler limits: an app sets its own in app.json (\"limits\"), up to these caps; the defaults
and what each stops are in docs/guide.md (Limits and the sandbox).
  operations      100000000
  wall_clock_ms   10000
  call_depth      64
  scan_rows       10000000
  string_bytes    16777216
  array_items     1000000
  map_items       1000000

Reload: SIGHUP (or POST /_pure/reload on --admin-listen) loads APP_DIR again. A version that
loads and declares the same tables, fields and indexes serves every request from then on, with
none refused; one that does not leaves the running version serving, and the log (or the POST's
answer) says why, with file:line:column. Changing tables, fields or indexes needs a restart.

Exit codes:
  0   stopped cleanly (SIGTERM or SIGINT): in-flight requests were answered and synced
  1   an unexpected error while serving
  2   bad command line
  3   the app directory failed to load (app.json or a script: the message names file:line:column)
  4   the data directory could not be opened or recovered (the message says what and where)
  5   the listen address could not be bound
  6   stopped by SIGTERM or SIGINT, but not cleanly: writes in flight were refused with 503
      instead of being synced (a full log), or connections still open at --shutdown-timeout-ms
      were cut
  7   (import, export) an input file or the output directory was refused: see their --help
  10  the store was poisoned by a failed write or sync, or by a write handler that panicked (a
      bug in Pure or Rhai): writes were refused with 503, and the server exited after a short
      drain so that a supervisor restarts it and recovery reads what is really on disk";

/// pure-serve: serves a Pure app directory over HTTP with JSON. Write handlers run one at a time
/// and are answered only once durable; read handlers run on every HTTP thread at once against
/// the latest durable snapshot.
///
/// `pure-serve check` and `pure-serve salvage` examine and rescue a data directory that does
/// not open; `pure-serve import` and `pure-serve export` load rows into a new data directory
/// from JSON Lines files and write a stopped server's rows out as such files.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "pure-serve",
    version,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Options {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The app directory: app.json (name, tables, routes) and the .rhai scripts.
    #[arg(required = true)]
    pub app_dir: Option<PathBuf>,

    /// Where the app's state lives (log and checkpoints) [default: <APP_DIR>/data].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,

    /// Address to listen on; port 0 picks a free port (the ready line prints the real one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Serve the built-in endpoints (GET /_pure/health, GET /_pure/metrics, POST /_pure/reload,
    /// POST /_pure/export?out=DIR, POST /_pure/clock?advance=MS) on this address instead of the
    /// app's, which then answers them 404. Without it, health and metrics are on the app's
    /// address, a reload is asked for with SIGHUP only, and there is no export or clock.
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,

    /// The host names clients reach the server by, as the Host header gives them (any port,
    /// any case), separated by commas; a request naming another gets 421, so that a web page
    /// that points its own name at this address (DNS rebinding) can neither write nor read.
    /// '*' answers any host. Applies to --admin-listen's address too. Behind a proxy, list the
    /// host the proxy forwards. [default: localhost, 127.0.0.1 and [::1] on a loopback
    /// address; any host on another address]
    #[arg(long, value_name = "HOSTS", value_delimiter = ',', value_parser = crate::origin::parse_allowed_host)]
    pub allowed_hosts: Option<Vec<String>>,

    /// What a 500's body tells the client: `full` names the handler, script, line and column,
    /// and the error's message, which may quote stored values (for development); `none` says
    /// only that the handler failed, with the request id. The server's log has the details
    /// either way. [default: full when --listen is a loopback address, none otherwise]
    #[arg(long, value_enum)]
    pub error_details: Option<ErrorDetails>,

    /// `always`: a write is answered only after its group is synced to disk (fdatasync).
    /// `none`: no sync at all; answers are NOT durable (for runs in RAM and benchmarks).
    #[arg(long, value_enum, default_value_t = Sync::Always)]
    pub sync: Sync,

    /// HTTP worker threads, which also run read handlers, and write handlers one at a time
    /// [default: the number of CPUs]. Reads run on all of them at once: on 2 CPUs with 90%
    /// reads, 1 thread served about 11% fewer requests than 2; with only writes, 1 and 2 served
    /// as many (research notes 008 and 009).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Run read handlers with tokio's block_in_place, so that a slow read never delays the other
    /// connections of its worker thread. Off by default: reads are short and bounded by the
    /// script limits, and handing them off halved read throughput when measured.
    #[arg(long)]
    pub offload_reads: bool,

    /// Largest request body accepted; a larger one gets 413 without being read.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_body: usize,

    /// Most connections served at once. At the cap, the connection idle the longest (one that
    /// has not sent a whole request since its last answer) is closed to make room for a new
    /// client; with none idle, new clients wait in the listen backlog.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Most connections at once from one IP address; one more is answered 503 and closed, so
    /// that one client cannot take every slot. Behind a proxy every client has the proxy's
    /// address: raise this to --max-connections there.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_peer: u32,

    /// Most live query streams open at once (GETs with `Accept: text/event-stream`); one more
    /// is answered 503 with Retry-After. Each stream also holds a connection, counted in
    /// --max-connections and --max-connections-per-peer, that is never closed as idle: keep
    /// this under --max-connections, so that requests find a slot.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub max_subscriptions: u32,

    /// The least time between two events of one live query stream: what changes meanwhile
    /// arrives in the next event (the newest answer), so that a state that changes a thousand
    /// times a second costs each subscriber at most 1000/MS events a second. 0 sends an event
    /// for every durable change the stream sees.
    #[arg(long, value_name = "MS", default_value_t = 25)]
    pub live_interval_ms: u64,

    /// How long a live query stream may be silent before it sends a comment line: proxies
    /// keep the connection, and a client that is gone is found out by the write.
    #[arg(long, value_name = "MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub live_heartbeat_ms: u64,

    /// Bytes of request bodies held at once by all requests being read, queued or run, beyond
    /// the first 64 KiB of each (those are bounded by --max-connections already); a body that
    /// does not fit is refused with 503 and Retry-After. Bounds the memory that clients sending
    /// large bodies can take (about this much again for the values parsed from them), and
    /// never refuses a body of 64 KiB or less.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub body_budget: usize,

    /// Bytes of answers held for clients that have not taken them yet (answers over 64 KiB
    /// count). An answer is never refused or delayed for it: when one would pass the budget,
    /// the connections whose clients stopped reading (took no byte for --answer-stall-ms) are
    /// reset, the longest stalled first, until it fits; a client that keeps reading is never
    /// cut, and with none stalled the budget is exceeded. Bounds the memory that clients who
    /// ask and never read can take. Raise it, or --answer-stall-ms, for clients that pause
    /// between reads of large answers.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub answer_budget: u64,

    /// How long a client may take no byte of an answer before it counts as having stopped
    /// reading: its connection may then be reset to make room in --answer-budget, for a new
    /// client at --max-connections, or at a stop (which does not wait for it). Past the budget
    /// it shrinks in proportion (at twice the budget, half), down to 100 ms, for a client that
    /// has not shown it reads its answer (its window opened again and again); a client that has
    /// shown a slower pace on its answer (its window opens seconds apart) gets four times the
    /// longest wait it has made.
    #[arg(long, value_name = "MS", default_value_t = 250)]
    pub answer_stall_ms: u64,

    /// The longest a connection waits for its client to take any byte of an answer; past it
    /// the connection is reset and the answer dropped (a write's changes stay committed). TCP
    /// shows a client taking bytes only when its receive window opens again: one that reads
    /// slowly through a large buffer takes nothing, as the server sees it, for the buffer's size
    /// over its pace (128 KB at 5 KB/s: 25 s). The memory of clients that stop reading is
    /// bounded by --answer-budget and their slots by --max-connections, not by this.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub send_timeout_ms: u64,

    /// Time a client has to send a request's headers; it also closes idle keep-alive connections.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,

    /// Time a client has to send a request's whole body once its headers arrived (408 after it).
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,

    /// Writes waiting for the owner; when full, writes get 503 instead of queueing without bound.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub queue_capacity: usize,

    /// Space preallocated for the record log of a new data directory (a directory keeps the
    /// log it has). The log then grows in place, doubling, while the writes made between two
    /// checkpoints need more room (see --checkpoint-interval), up to --log-capacity-max.
    #[arg(long, value_name = "BYTES", default_value_t = pure_runtime::LOG_CAPACITY)]
    pub log_capacity: u64,

    /// The largest the record log grows to. A log this large that fills up makes writes wait
    /// for a checkpoint to free it (503 past --write-timeout-ms). It also bounds the log a
    /// restart replays after a crash, and the largest write (an eighth of it, at most 4 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = pure_runtime::LOG_CAPACITY_MAX)]
    pub log_capacity_max: u64,

    /// The longest a write waits for room in a full log (for a checkpoint to free it: on a
    /// full disk none can be written). Past it the write is answered 503, undone and never
    /// applied, and new writes are refused until a checkpoint succeeds.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub write_timeout_ms: u64,

    /// Commit every group on the syncer thread. By default, while syncs are quick (a data
    /// directory in RAM, or --sync none), a write that comes alone (clients writing one at a
    /// time) is committed on the HTTP thread that ran it, which saves waking the syncer thread
    /// for each.
    #[arg(long)]
    pub lone_writes_on_syncer: bool,

    /// A checkpoint is taken when the log since the last one exceeds this, and also
    /// --checkpoint-image-ratio times the last checkpoint's image (sooner while the log is
    /// too small for that: at three quarters of it, as it grows).
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub checkpoint_interval: u64,

    /// A checkpoint writes the whole state, the log only what changed: on a state larger than
    /// --checkpoint-interval, the log grows to this many times the last checkpoint's image
    /// before the next checkpoint, so that checkpoints write at most 1/RATIO of the log's
    /// bytes (never past three quarters of the log's size, so that writes seldom wait for
    /// room). A larger ratio writes less and replays more after a crash; 0: the interval alone.
    #[arg(long, value_name = "RATIO", default_value_t = pure_runtime::CHECKPOINT_IMAGE_RATIO)]
    pub checkpoint_image_ratio: f64,

    /// On a poisoned store: how long to keep answering (reads, and 503 for writes) before exiting
    /// with status 10.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub poison_drain_ms: u64,

    /// On SIGTERM/SIGINT: the longest wait for open connections to finish their requests.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub shutdown_timeout_ms: u64,

    /// How log lines (handlers' print, debug, warn and error, and the access log) are written
    /// to standard error: text, or one JSON object a line. The server's own start and stop
    /// messages stay text. A terminal or pipe that reads slower than lines come loses lines
    /// rather than slowing handlers down (pure_log_lines_dropped_total counts them).
    #[arg(long, value_enum, default_value_t = crate::log::Format::Text)]
    pub log_format: crate::log::Format,

    /// Log every request: peer, method, path, status, duration and request id.
    #[arg(long)]
    pub access_log: bool,

    /// A file of NAME=value lines giving the values of the settings and secrets the app
    /// declares ("env" and "secrets" in app.json; scripts read them with env("NAME")). Read at
    /// start and at each reload; a name it does not give is taken from the server's
    /// environment, and a declared name neither gives stops the load.
    #[arg(long, value_name = "FILE")]
    pub secrets: Option<std::path::PathBuf>,

    /// For tests: handlers' now() answers this (milliseconds since the epoch) instead of the
    /// wall clock. uuid() takes its time from it too, and scheduled entries fall due by it; it
    /// moves only by POST /_pure/clock?advance=MS on --admin-listen's address.
    #[arg(long, value_name = "MS")]
    pub fixed_now: Option<i64>,

    /// For tests: random() and uuid() draw from a generator seeded with this, shared by every
    /// call in the order calls draw, instead of a secure generator per thread. The same
    /// requests in the same order then get the same answers. Never in production: the values
    /// can be guessed.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Examines a data directory without changing anything in it (it only takes the
    /// directory's lock, so the server must be stopped): every checkpoint and its LSN, the
    /// log's header and frames, how the log ends (clean, a torn tail that open cuts, or damage
    /// inside acknowledged data, with file and byte offset), and the durable LSN. It also
    /// decodes the state, as recovery would. Exit 0 when the directory would open cleanly, 4
    /// when it would not (or cannot be read).
    #[command(after_help = CHECK_HELP)]
    Check {
        /// The data directory to examine.
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
    },
    /// Writes the longest valid prefix of a damaged directory's state into a new directory:
    /// the newest valid checkpoint and every valid record after it, up to the first damage.
    /// Reports exactly which LSNs were saved and which were not. Never changes or deletes
    /// anything in DIR. Exit 0 once NEW is written and checked to open cleanly.
    #[command(after_help = SALVAGE_HELP)]
    Salvage {
        /// The damaged data directory (read only).
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
        /// The new directory to write (created; if it exists it must hold no store).
        #[arg(long, value_name = "NEW")]
        into: PathBuf,
    },
    /// Loads rows from JSON Lines files into a new data directory, as one durable step: every
    /// file is read and checked and the tables built in memory, then written as one checkpoint.
    /// On any error nothing is written. Refuses a DIR that holds a store already (a log or a
    /// checkpoint); a missing or empty DIR is fine. Serve it afterwards with
    /// `pure-serve APP_DIR --data DIR`.
    #[command(after_help = IMPORT_HELP)]
    Import {
        /// The app directory: its app.json declares the tables and fields the rows must fit.
        app_dir: PathBuf,
        /// The new data directory to write (created if missing; it must hold no store).
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
        /// One file per table, each named <table>.jsonl after a table of app.json.
        #[arg(value_name = "FILES", required = true)]
        files: Vec<PathBuf>,
        /// Space preallocated for the new directory's record log. The served directory keeps
        /// this log and grows it in place as its writes need (up to the server's
        /// --log-capacity-max).
        #[arg(long, value_name = "BYTES", default_value_t = pure_runtime::LOG_CAPACITY)]
        log_capacity: u64,
    },
    /// Runs the app's transcripts (APP_DIR/tests/*.transcript), each against a fresh server on
    /// a new data directory, with the clock and randomness fixed; prints every answer that
    /// differs from the transcript, with the request, the expected and the actual answer.
    /// Exit 0 when every answer is as written, 1 when one is not, 3 when there is nothing to
    /// run or the app does not start.
    #[command(after_help = TEST_HELP)]
    Test {
        /// The app directory, whose tests/ holds the transcripts.
        app_dir: PathBuf,
        /// Write the answers the app gives into the transcripts where they differ, instead of
        /// failing: to add a case, write its request and any status, and run with --update.
        #[arg(long)]
        update: bool,
    },
    /// Writes the rows of a data directory into JSON Lines files, one per table the app
    /// declares, OUT/<table>.jsonl, in key order: the format `import` reads. From a stopped
    /// server's directory (--data: it changes nothing there, and takes the directory's lock),
    /// or from a running server without stopping it (--url, its admin address: the server
    /// writes its last durable state, at one LSN, into OUT on its machine while it goes on
    /// taking writes). Refuses a DIR that would not open cleanly, and an OUT that is not empty.
    #[command(after_help = EXPORT_HELP)]
    Export {
        /// The app directory: the tables and fields it declares are the ones exported (with
        /// --url, the running server's app decides, and this is not needed).
        #[arg(required_unless_present = "url")]
        app_dir: Option<PathBuf>,
        /// The data directory of a stopped server to read (read only).
        #[arg(
            long,
            value_name = "DIR",
            required_unless_present = "url",
            conflicts_with = "url"
        )]
        data: Option<PathBuf>,
        /// The admin address of a running server (http://HOST:PORT, as --admin-listen gave it):
        /// it exports its state while it runs.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The directory to write the files into (created if missing; it must be empty).
        #[arg(long, value_name = "OUT")]
        out: PathBuf,
    },
}

const TEST_HELP: &str = "\
A transcript holds exchanges: a request line, then the expected answer line.
  POST /scores {\"player\": \"ann\", \"score\": 10}
  200 {\"player\": \"ann\", \"best\": 10, \"posts\": 1}
The request is METHOD /PATH [JSON BODY]; the answer STATUS [JSON] (without JSON only the status
is compared; JSON is compared as values, not text). '#' starts a comment line. A line
'#! --flag value' gives the server more flags; a line 'restart' stops the server and starts it
again on the same data (what follows sees what recovery brought back). Each transcript gets a
new data directory and --sync none; now() is 1767225600000 and random()/uuid() are seeded with 1
unless its flags say otherwise.";

const IMPORT_HELP: &str = "\
Each line of <table>.jsonl is one row:
  {\"key\": 7, \"row\": {\"name\": \"ann\", \"tags\": [\"a\", \"b\"], \"score\": 2.5}}
The key is an integer, a string, or an array of 1 to 4 integers and strings (a composite key,
as t.get(a, b) gives it). The row holds fields the table declares in app.json, each at most
once; a field left out, or null, is (). Values are what a script can store: null, booleans,
integers (i64; -0 is 0), floats, strings, and arrays and objects of those, each field within
the handlers' size limits and nested at most 128 levels deep, as a stored value is. Blank lines
are skipped. A key given twice in a table is an error naming both lines. An error in a line
names file:line:column; on any error nothing is written.

A line holds at most 134217728 bytes (128 MiB), its newline not counted: more than any row a
handler can write takes (a write's changes take at most 4 MiB in the log), and more than a
field holding the most string bytes a handler may (16 MiB), written as escapes. A longer line
is refused once that much of it is read (exit 7), so a file without newlines is not read
whole. Export writes no longer line.

A progress bar on stderr (when it is a terminal) shows rows and bytes read; at the end one
line on stdout gives the rows per table, the total and the time taken.

Exit codes:
  0   DIR written and read back: it opens cleanly with exactly the rows imported
  2   bad command line
  3   the app directory failed to load
  4   DIR holds a store already, is in use by another process (the message names its PID), or
      cannot be written (what was written is removed)
  7   an input file was refused: not named after a declared table, unreadable, or a line that
      is not JSON, is longer than 128 MiB, names an undeclared field, holds a value a script
      cannot store, or repeats a key (the message names file:line)";

const EXPORT_HELP: &str = "\
Each line is {\"key\":<key>,\"row\":{...}}, compact, with every field the table declares in
declared order, () written as null. A key of one part is written as that integer or string,
a composite key as an array. Floats are written in their shortest form that reads back to
the same float. Exporting, importing those files into a new directory and exporting that
gives the same bytes.

Tables and fields in the data that the app no longer declares are not exported: a note on
stderr names each one that holds data. A float JSON cannot write (NaN or infinite) is written
as null, with a note.

With --url, the server writes the files (OUT is a path on its machine, made absolute here) from
the snapshot its reads see, so the files hold the state at one LSN, the one printed; writes go
on meanwhile, and the snapshot is kept in memory until the files are written.

Exit codes:
  0   every declared table written to OUT/<table>.jsonl
  2   bad command line
  3   the app directory failed to load
  4   DIR cannot be read, holds no store, is in use (a running server: stop it first, or use
      --url), or would not open cleanly (damage: see `pure-serve check --data DIR`); with
      --url, the server could not be reached or did not export
  7   OUT is not empty or cannot be written, or a row would take a line longer than import
      reads (128 MiB; the message names its key): the files written are removed";

const CHECK_HELP: &str =
    "A torn tail (the last frame, cut by a crash before it was acknowledged) is normal: the server
cuts it at start and goes on. Damage inside acknowledged data (a frame that a later one
acknowledges, a damaged checkpoint, a damaged log header) makes the server refuse to start;
`pure-serve salvage` saves what comes before it.";

const SALVAGE_HELP: &str = "\
What it can recover: every write up to the first damage, as of the newest checkpoint that is
intact. What it cannot: the writes after the first damage, even those in intact frames further
on (applying them without the ones before would make a state that never existed), and, when the
newest checkpoint is damaged, whatever of the log an older state would need but was already
reused (older checkpoints are removed once a newer one is installed). Keep DIR until you are
sure of NEW; then serve NEW with --data NEW.";

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorDetails {
    /// The script, line, column and message of a handler's failure, in its 500.
    Full,
    /// A 500 says only that the handler failed; the details are in the server's log.
    None,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    Always,
    None,
}

impl Options {
    /// The app directory to serve (clap requires it when no command is given).
    pub fn app_dir(&self) -> &std::path::Path {
        self.app_dir
            .as_deref()
            .expect("clap requires APP_DIR without a command")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data
            .clone()
            .unwrap_or_else(|| self.app_dir().join("data"))
    }

    /// What a 500 tells the client: as given, else everything only where no one but this
    /// machine can connect (an error's message may quote a stored value).
    pub fn error_details(&self) -> ErrorDetails {
        match self.error_details {
            Some(details) => details,
            None if self.listen.ip().is_loopback() => ErrorDetails::Full,
            None => ErrorDetails::None,
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |count| count.get()))
            .max(1)
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    /// The caps `--help` names are the ones the server applies.
    #[test]
    fn the_help_names_the_handler_limit_caps() {
        let caps = pure_lang::LIMIT_CAPS;
        for (name, cap) in [
            ("operations", caps.operations_max),
            ("wall_clock_ms", caps.wall_clock_max.as_millis() as u64),
            ("call_depth", caps.call_levels_max as u64),
            ("scan_rows", caps.scan_rows_max),
            ("string_bytes", caps.string_bytes_max as u64),
            ("array_items", caps.array_items_max as u64),
            ("map_items", caps.map_items_max as u64),
        ] {
            let line = super::EXIT_CODES
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in the help"));
            assert_eq!(
                line.split_whitespace().nth(1),
                Some(cap.to_string().as_str()),
                "{line}"
            );
        }
    }

    /// The longest import line the help states is the one import reads.
    #[test]
    fn the_import_help_states_the_longest_line() {
        let max = pure_runtime::LINE_BYTES_MAX;
        let stated = format!("at most {max} bytes ({} MiB)", max >> 20);
        assert!(
            super::IMPORT_HELP.replace('\n', " ").contains(&stated),
            "{stated}"
        );
    }
}
