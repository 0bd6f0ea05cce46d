//! What a handler may ask of the world outside its tables: the time (`now()`), fresh ids
//! (`uuid()`), random numbers (`random(lo, hi)`), and a log (`print`, `debug`, `warn`, `error`).
//!
//! A call's log lines are kept until the call ends and then handed to the app's [`LogSink`]
//! (the embedder's: lang does no I/O). So a compiled call that falls back to Rhai logs nothing
//! twice: its lines are dropped with the rest of its attempt. A call keeps at most
//! [`LOG_LINES_PER_CALL_MAX`] lines of at most [`LOG_LINE_BYTES_MAX`] bytes; past that it says
//! how many it dropped.
//!
//! None of them can make recovery diverge: recovery applies the logged effects of a write and
//! never runs its script again, so a value drawn once is the value kept.
//!
//! Live, the time is the wall clock and the numbers come from the thread's cryptographically
//! secure generator (`rand::rng()`). A test can fix the time and seed the numbers
//! ([`World::fixed`]): then every run of the same requests, in the same order, answers the same.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use rhai::ImmutableString;

use crate::script::settings::Settings;
use crate::state::schema::TableId;

/// Where `now()`, `uuid()` and `random()` take their values. One per app, shared by every thread.
#[derive(Debug, Default)]
pub struct World {
    /// A fixed `now()`, in milliseconds since the epoch, which only `advance` moves; `None`
    /// reads the wall clock.
    fixed_now: Option<Clock>,
    /// For tests: each call draws from a generator seeded with this and the call's number
    /// (so a compiled attempt that Rhai runs again draws the same numbers again); `None` uses
    /// each thread's secure generator.
    seed: Option<u64>,
    /// Calls begun, for the seeded generator.
    calls: AtomicU64,
}

/// A fixed clock for tests, shared by the versions of an app (a reload keeps the time it moved
/// to), in milliseconds since the epoch.
#[derive(Clone, Debug, Default)]
pub struct Clock(Arc<AtomicI64>);

impl Clock {
    pub fn new(now_ms: i64) -> Clock {
        Clock(Arc::new(AtomicI64::new(now_ms)))
    }

    pub fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Moves the clock `ms` forward; the time it shows now. `None`, and the clock as it was,
    /// for a move past the last time an `i64` of milliseconds holds.
    pub fn advance(&self, ms: i64) -> Option<i64> {
        let mut now = self.0.load(Ordering::SeqCst);
        loop {
            let later = now.checked_add(ms)?;
            match self
                .0
                .compare_exchange(now, later, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Some(later),
                Err(moved) => now = moved,
            }
        }
    }
}

impl World {
    /// The live world: the wall clock and a secure generator.
    pub fn live() -> World {
        World::default()
    }

    /// A world for tests: `now()` is `now_ms` (when given) and the numbers come from `seed`
    /// (when given) and the call's number: the same calls in the same order draw the same
    /// numbers, whether a call ran compiled, in Rhai, or both.
    pub fn fixed(now_ms: Option<i64>, seed: Option<u64>) -> World {
        World::with_clock(now_ms.map(Clock::new), seed)
    }

    /// [`World::fixed`] on a clock that may be shared with other worlds.
    pub fn with_clock(clock: Option<Clock>, seed: Option<u64>) -> World {
        World {
            fixed_now: clock,
            seed,
            calls: AtomicU64::new(0),
        }
    }

    /// The fixed clock, if `now()` reads one.
    pub fn clock(&self) -> Option<&Clock> {
        self.fixed_now.as_ref()
    }

    /// What `now()` answers at this moment, in milliseconds since the epoch.
    pub fn now_ms(&self) -> i64 {
        clock(self.fixed_now.as_ref().map(Clock::now_ms))
    }

    pub fn is_live(&self) -> bool {
        self.fixed_now.is_none() && self.seed.is_none()
    }
}

/// `fixed`, or the wall clock in milliseconds since the epoch.
fn clock(fixed: Option<i64>) -> i64 {
    fixed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    })
}

/// A call's seeded generator: the seed and the call's number decide every number it draws.
struct Seeded {
    seed: u64,
    rng: StdRng,
}

impl Seeded {
    fn new(seed: u64) -> Seeded {
        Seeded {
            seed,
            rng: StdRng::seed_from_u64(seed),
        }
    }
}

/// Runs `f` on the call's generator: its seeded one, else the thread's secure one.
fn draw<R>(call: &mut Call, f: impl FnOnce(&mut dyn RngCore) -> R) -> R {
    match &mut call.seeded {
        Some(seeded) => f(&mut seeded.rng),
        None => f(&mut rand::rng()),
    }
}

/// A log line's level: `debug(...)`, `print(...)` (info), `warn(...)`, `error(...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// One line a handler logged, with the call it came from.
#[derive(Debug)]
pub struct LogLine<'a> {
    pub level: Level,
    pub handler: &'a str,
    pub request_id: &'a str,
    pub message: &'a str,
}

/// Where handlers' log lines go. Called on the thread that ran the handler (for a write, the
/// owner's role): it must not block.
pub trait LogSink: Send + Sync {
    fn log(&self, line: &LogLine<'_>);
}

/// Lines one call may log; more are counted and reported as dropped.
pub const LOG_LINES_PER_CALL_MAX: usize = 64;
/// Bytes of one log line's message; a longer one is cut (at a character boundary).
pub const LOG_LINE_BYTES_MAX: usize = 4096;

/// The running call: where its lines go and what they are tagged with. The pointers are to
/// the caller's data, alive until `end_call`.
struct Call {
    sink: Option<Arc<dyn LogSink>>,
    handler: *const str,
    request_id: *const str,
    lines: Vec<(Level, String)>,
    dropped: usize,
    /// Boxed: a generator is a few hundred bytes, which every call would otherwise copy into
    /// and out of the thread's slot.
    seeded: Option<Box<Seeded>>,
    /// The world's fixed time, if any.
    fixed_now: Option<i64>,
    /// The call's `now()`, read on first use: one value for the whole call.
    now: Option<i64>,
    /// The first key of digits that missed a table holding the same integer key: the sign of a
    /// path parameter left a string (`{id}` for `{id:int}`).
    string_key_miss: Option<(TableId, String)>,
    /// The app's settings and secrets: what `env()` reads, and what its lines must not show.
    settings: *const Settings,
    /// The names of the functions the app can call as handlers: what `schedule` may name.
    handlers: *const HashSet<String>,
    /// Schedule entries this call made.
    scheduled: u64,
}

thread_local! {
    static CALL: RefCell<Option<Call>> = const { RefCell::new(None) };
}

/// Starts a call of `handler` for request `request_id` in `world`, all of which must outlive
/// it ([`end_call`] before they go); its log lines go to `sink`.
pub(crate) fn begin_call(
    world: &World,
    (settings, handlers): (&Settings, &HashSet<String>),
    sink: Option<&Arc<dyn LogSink>>,
    handler: &str,
    request_id: &str,
) {
    let seeded = world.seed.map(|seed| {
        // SplitMix64's step: calls' seeds far apart.
        let n = world.calls.fetch_add(1, Ordering::Relaxed);
        Box::new(Seeded::new(
            seed ^ n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        ))
    });
    CALL.with(|c| {
        // One call at a time on a thread. A debug assert: a panic that escaped a call (a bug)
        // leaves its `Call` behind, which this one may replace (its pointers are never read
        // again); a plain assert would then refuse every later call on the thread.
        debug_assert!(c.borrow().is_none(), "the last call on this thread ended");
        *c.borrow_mut() = Some(Call {
            sink: sink.cloned(),
            handler,
            request_id,
            lines: Vec::new(),
            dropped: 0,
            seeded,
            fixed_now: world.fixed_now.as_ref().map(Clock::now_ms),
            now: None,
            handlers,
            scheduled: 0,
            string_key_miss: None,
            settings,
        })
    });
}

/// Ends the call: its log lines go to the sink.
pub(crate) fn end_call() {
    let Some(call) = CALL.with(|c| c.borrow_mut().take()) else {
        return;
    };
    let Some(sink) = &call.sink else {
        return;
    };
    // SAFETY: see `Call`: `begin_call`'s caller keeps them alive until now.
    let (handler, request_id) = unsafe { (&*call.handler, &*call.request_id) };
    let dropped = (call.dropped > 0).then(|| {
        format!(
            "{} more log lines of this call were dropped (at most {LOG_LINES_PER_CALL_MAX} a call)",
            call.dropped
        )
    });
    let dropped = dropped.iter().map(|m| (Level::Warn, m));
    for (level, message) in call.lines.iter().map(|(l, m)| (*l, m)).chain(dropped) {
        sink.log(&LogLine {
            level,
            handler,
            request_id,
            message,
        });
    }
}

/// Notes that the running call looked for the string key `text` in `table`, which has no row
/// there but one at the integer `text` spells.
pub(crate) fn note_string_key_miss(table: TableId, text: &str) {
    CALL.with(|c| {
        if let Some(call) = c.borrow_mut().as_mut() {
            call.string_key_miss
                .get_or_insert_with(|| (table, text.to_string()));
        }
    });
}

/// What [`note_string_key_miss`] noted in the running call, taken.
pub(crate) fn take_string_key_miss() -> Option<(TableId, String)> {
    CALL.with(|c| c.borrow_mut().as_mut()?.string_key_miss.take())
}

/// Starts the call over (a compiled attempt that Rhai runs again): the lines it logged are
/// forgotten, and a seeded generator draws the same numbers again. `now()` stays.
pub(crate) fn restart_call() {
    CALL.with(|c| {
        if let Some(call) = c.borrow_mut().as_mut() {
            call.lines.clear();
            call.dropped = 0;
            call.scheduled = 0;
            if let Some(seeded) = &mut call.seeded {
                **seeded = Seeded::new(seeded.seed);
            }
        }
    });
}

/// Whether the running call's app can call `name` as a handler (`false` outside a call).
pub(crate) fn is_handler(name: &str) -> bool {
    CALL.with(|c| {
        c.borrow().as_ref().is_some_and(|call| {
            // SAFETY: see `Call`.
            unsafe { &*call.handlers }.contains(name)
        })
    })
}

/// Counts a schedule entry made by the running call; how many it has made now.
pub(crate) fn note_scheduled() -> Result<u64, String> {
    in_call(|call| {
        call.scheduled += 1;
        call.scheduled
    })
}

/// Keeps a line for the running call; outside a call (or without a sink) it goes nowhere.
pub(crate) fn log(level: Level, message: &str) {
    CALL.with(|c| {
        let mut call = c.borrow_mut();
        let Some(call) = call.as_mut().filter(|call| call.sink.is_some()) else {
            return;
        };
        if call.lines.len() >= LOG_LINES_PER_CALL_MAX {
            call.dropped += 1;
            return;
        }
        // Secrets out first: a cut could leave the start of one.
        // SAFETY: see `Call`.
        let settings = unsafe { &*call.settings };
        let message = settings.redact(message);
        let mut end = message.len().min(LOG_LINE_BYTES_MAX);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        call.lines.push((level, message[..end].to_string()));
    });
}

/// `warn(x)` and `error(x)`: the value's text, which is made by walking it, so only for a value
/// that meets the depth rule (a script error otherwise, at the call).
fn log_value(level: Level, value: &rhai::Dynamic) -> Result<(), Box<rhai::EvalAltResult>> {
    if !crate::state::depth::within(value) {
        let what = match level {
            Level::Warn => "the value given to warn",
            _ => "the value given to error",
        };
        return Err(crate::script::api_error::api_error(
            crate::state::depth::too_deep(what),
        ));
    }
    log(level, &value.to_string());
    Ok(())
}

fn in_call<R>(f: impl FnOnce(&mut Call) -> R) -> Result<R, String> {
    CALL.with(|c| match c.borrow_mut().as_mut() {
        Some(call) => Ok(f(call)),
        None => Err("now(), uuid() and random() can only be used inside a handler".into()),
    })
}

/// Registers `now()`, `uuid()` and `random(lo, hi)`; their errors are script errors at the call.
pub(crate) fn register(engine: &mut rhai::Engine) {
    use crate::script::api_error::api_error as fail;
    engine.on_print(|text| log(Level::Info, text));
    engine.on_debug(|text, _, _| log(Level::Debug, text));
    engine.register_fn("warn", |x: rhai::Dynamic| log_value(Level::Warn, &x));
    engine.register_fn("error", |x: rhai::Dynamic| log_value(Level::Error, &x));
    engine.register_fn("now", || now().map_err(fail));
    engine.register_fn("uuid", || uuid().map_err(fail));
    engine.register_fn("random", |lo: i64, hi: i64| random(lo, hi).map_err(fail));
    engine.register_fn("env", |name: &str| env(name).map_err(fail));
    engine.register_fn("secret_eq", |a: &str, b: &str| {
        crate::script::settings::secret_eq(a, b)
    });
    // Rhai's own `sleep` blocks the thread, which the time budget does not see (it counts the
    // thread's CPU time): a handler could hold an HTTP thread, or for a write every other
    // write, for as long as it asked. Registered here, ahead of Rhai's.
    engine.register_fn("sleep", |_: i64| -> Result<(), Box<rhai::EvalAltResult>> {
        Err(fail(NO_SLEEP.to_string()))
    });
    engine.register_fn("sleep", |_: f64| -> Result<(), Box<rhai::EvalAltResult>> {
        Err(fail(NO_SLEEP.to_string()))
    });
}

const NO_SLEEP: &str = "sleep() is not available to handlers: a handler holds its thread (and a \
                        write, every other write) until it returns; answer now, and let the \
                        client ask again later";

/// `env("NAME")`: the value of a name the app declares under `"env"` or `"secrets"`.
pub(crate) fn env(name: &str) -> Result<ImmutableString, String> {
    in_call(|call| {
        // SAFETY: see `Call`.
        let settings = unsafe { &*call.settings };
        settings.get(name).cloned().ok_or_else(|| {
            let mut names: Vec<&str> = settings.names().collect();
            names.sort();
            format!(
                "env({name:?}): {name} is not declared in app.json's \"env\" or \"secrets\" \
                 (declared: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
    })?
}

/// `now()`: milliseconds since the epoch, the same for the whole call.
pub(crate) fn now() -> Result<i64, String> {
    in_call(|call| {
        let fixed = call.fixed_now;
        *call.now.get_or_insert_with(|| clock(fixed))
    })
}

/// `random(lo, hi)`: an integer in `lo..=hi`.
pub(crate) fn random(lo: i64, hi: i64) -> Result<i64, String> {
    if lo > hi {
        return Err(format!(
            "random: the low end ({lo}) is above the high end ({hi})"
        ));
    }
    in_call(|call| draw(call, |rng| rng.random_range(lo..=hi)))
}

/// `uuid()`: a version 7 UUID (RFC 9562), time-ordered across milliseconds: the call's
/// `now()` in its first 48 bits, then 74 random bits.
pub(crate) fn uuid() -> Result<String, String> {
    let now = now()?;
    let random: u128 = in_call(|call| draw(call, |rng| rng.random()))?;
    let mut bits = (now as u128 & ((1 << 48) - 1)) << 80;
    bits |= 0x7 << 76; // version 7
    bits |= (random >> 62 & 0xfff) << 64; // rand_a, 12 bits
    bits |= 0b10 << 62; // the variant
    bits |= random & ((1 << 62) - 1); // rand_b, 62 bits
    let hex = format!("{bits:032x}");
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Begins a call of handler "h" for request "id" in `world`, with no settings and no
    /// handlers to schedule.
    fn begin(world: &World) {
        begin_call(
            world,
            (&Settings::default(), &HashSet::new()),
            None,
            "h",
            "id",
        );
    }

    #[test]
    fn a_fixed_world_answers_the_same_and_a_uuid_has_its_shape() {
        let draw = || {
            let world = World::fixed(Some(1_700_000_000_123), Some(7));
            begin(&world);
            let values = (now(), uuid(), uuid(), random(1, 6), random(-3, -3));
            end_call();
            values
        };
        let (a, b) = (draw(), draw());
        assert_eq!(a, b, "the same seed and clock give the same values");
        assert_eq!(a.0, Ok(1_700_000_000_123));
        assert_ne!(a.1, a.2, "two uuids differ");
        assert_eq!(a.4, Ok(-3));
        let id = a.1.expect("a uuid");
        assert_eq!(id.len(), 36);
        assert_eq!(&id[..13], "018bcfe5-687b", "the time in the first 48 bits");
        assert_eq!(&id[14..15], "7", "version 7");
        assert!("89ab".contains(&id[19..20]), "the RFC variant: {id}");
        assert!((1..=6).contains(&a.3.expect("a number")));
    }

    /// The 74 random bits are 74: rand_a's low byte and rand_b's top byte (after the variant)
    /// once came from the same bits. Equal by chance one time in 256.
    #[test]
    fn a_uuids_random_bits_are_independent() {
        let world = World::live();
        begin(&world);
        let same = (0..512)
            .filter(|_| {
                let id = uuid().expect("a uuid").replace('-', "");
                let bits = u128::from_str_radix(&id, 16).expect("hex");
                (bits >> 64 & 0xff) == (bits >> 54 & 0xff)
            })
            .count();
        end_call();
        assert!(same < 40, "{same} of 512 share their bits");
    }

    #[test]
    fn now_is_one_value_for_a_call_and_nothing_outside_one() {
        let world = World::live();
        begin(&world);
        let first = now().expect("in a call");
        std::thread::sleep(std::time::Duration::from_millis(3));
        assert_eq!(now(), Ok(first));
        end_call();
        assert!(now().is_err(), "outside a call");
        begin(&world);
        std::thread::sleep(std::time::Duration::from_millis(3));
        assert!(
            now().expect("in a call") > first,
            "the next call reads the clock again"
        );
        end_call();
        assert!(random(1, 2).is_err(), "outside a call");
        assert!(World::live().is_live());
    }

    #[test]
    fn a_random_range_must_be_in_order() {
        let world = World::fixed(None, Some(1));
        begin(&world);
        assert!(random(2, 1).unwrap_err().contains("above"));
        let all = (0..2000).map(|_| random(0, 3).expect("a number"));
        let mut seen = [false; 4];
        for n in all {
            seen[n as usize] = true;
        }
        assert_eq!(seen, [true; 4], "every value of the range comes up");
        end_call();
    }
}
