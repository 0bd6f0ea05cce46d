//! The driver: terminals with the same deal, timing and counting for every engine. A terminal
//! deals its next transaction, times the engine's call with the monotonic clock, and (with
//! `--think`) waits the specification's keying time before and think time after it. With
//! `--rate N` the loop is open: each terminal starts its transactions at fixed intervals, so
//! that the terminals together offer N a second, whatever the engine takes, and a latency is
//! counted from the transaction's intended start, not from when a late terminal got to send it
//! (no coordinated omission: a stall shows in every transaction it delayed, as wrk2 and
//! HdrHistogram count). How late the driver itself started transactions is kept apart. Over
//! HTTP the terminals are tasks of one event loop (`terminal_http`): a thread per terminal
//! sleeps and wakes on every answer, and on 2 cores took 21–26 µs of CPU per transaction from
//! the server it measured (research note 027). In-process, where the engine's call runs on the
//! terminal's thread, each terminal has a thread (`terminal`).
//!
//! The figures count the transactions that end inside the measured window (the first second
//! holds the ones each terminal had running when it opened); those still running when it
//! closes are counted apart, with the longest any of them had run, so that a stall at the end
//! shows. A failed transaction is never throughput: it is counted as an error of its type, and
//! any error in any phase fails the run. Every completed transaction, warm-up included, goes
//! into the tallies that the consistency check compares the tables with.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;

use super::super::check::Tallies;
use super::super::input::{Kind, Terminal, Txn};
use super::super::population::LOAD_TIME;
use super::super::rng::Rng;
use super::super::Answer;
use super::engine::Engine;
use crate::harness::http::AsyncClient;
use crate::harness::usage::thread_cpu;

/// How a transaction ended, as dbt2 writes it in its mix log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed (C).
    Committed,
    /// A New-Order rolled back by its unused item, as the mix asks (R); a completed New-Order.
    RolledBack,
    /// Anything else (E): an error status, or no answer.
    Error,
}

impl Outcome {
    pub fn code(self) -> char {
        match self {
            Outcome::Committed => 'C',
            Outcome::RolledBack => 'R',
            Outcome::Error => 'E',
        }
    }
}

/// One measured transaction, for the latency log.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Microseconds from the start of the run to the start of the transaction.
    pub start_us: u64,
    pub terminal: u32,
    pub kind: Kind,
    pub latency_us: u64,
    pub outcome: Outcome,
    /// The HTTP status (0: no answer).
    pub status: u16,
}

/// How a terminal starts its transactions.
#[derive(Clone, Copy, Debug)]
pub enum Pacing {
    /// Closed loop: the next as soon as the last has ended.
    Closed,
    /// The specification's keying and think times, drawn from this seed.
    Think(u64),
    /// Open loop: the k-th transaction is meant to start at `first + k * interval` after the
    /// run's start, and its latency counts from then.
    Rate { first: Duration, interval: Duration },
}

impl Pacing {
    /// Terminal `index`'s pacing of `terminals` that together offer `rate` transactions a
    /// second: each one every `terminals / rate` seconds, their first starts spread evenly.
    pub fn open(rate: f64, index: usize, terminals: usize) -> Pacing {
        Pacing::Rate {
            first: Duration::from_secs_f64(index as f64 / rate),
            interval: Duration::from_secs_f64(terminals as f64 / rate),
        }
    }
}

/// Where a terminal is in its pacing.
struct Pace {
    pacing: Pacing,
    think_rng: Option<Rng>,
    /// The next intended start (open loop).
    next: Option<Instant>,
}

impl Pace {
    fn new(pacing: Pacing, clock: &Clock, index: u32) -> Pace {
        Pace {
            pacing,
            think_rng: match pacing {
                Pacing::Think(seed) => Some(Rng::stream(seed, "think", u64::from(index))),
                _ => None,
            },
            next: match pacing {
                Pacing::Rate { first, .. } => Some(clock.started + first),
                _ => None,
            },
        }
    }

    /// The pause before a transaction of `kind`, and when it is meant to start (open loop).
    fn before(&mut self, kind: Kind) -> (Option<Duration>, Option<Instant>) {
        match self.pacing {
            Pacing::Closed => (None, None),
            Pacing::Think(_) => (Some(keying_and_think(kind).0), None),
            Pacing::Rate { interval, .. } => {
                let intended = self.next.expect("an open loop has its next start");
                self.next = Some(intended + interval);
                let now = Instant::now();
                (
                    Some(intended.saturating_duration_since(now)),
                    Some(intended),
                )
            }
        }
    }

    /// The pause after a transaction of `kind`.
    fn after(&mut self, kind: Kind) -> Option<Duration> {
        let rng = self.think_rng.as_mut()?;
        Some(think_time(rng, keying_and_think(kind).1))
    }
}

/// One transaction type's figures over the window.
pub struct TypeFigures {
    pub latency_us: Histogram<u64>,
    pub rollbacks: u64,
    pub errors: u64,
}

impl TypeFigures {
    fn new() -> TypeFigures {
        TypeFigures {
            latency_us: new_histogram(),
            rollbacks: 0,
            errors: 0,
        }
    }

    fn merge(&mut self, other: &TypeFigures) -> Result<()> {
        self.latency_us.add(&other.latency_us)?;
        self.rollbacks += other.rollbacks;
        self.errors += other.errors;
        Ok(())
    }
}

/// 1 µs to 10 minutes at 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

/// What the terminals measured.
pub struct Driven {
    pub types: BTreeMap<Kind, TypeFigures>,
    /// Transactions completed in each second of the window.
    pub per_second: Vec<u64>,
    /// CPU the terminal threads spent outside the engine's calls (dealing, timing, counting)
    /// during the window.
    pub driver_cpu: Duration,
    pub tallies: Tallies,
    /// Failed transactions in every phase (warm-up and after the window included), and the
    /// first few of them, for the report.
    pub errors_total: u64,
    pub first_errors: Vec<String>,
    /// Transactions running when the window closed (begun before, ended after), and the
    /// longest any of them had run by then.
    pub unfinished: u64,
    pub unfinished_oldest: Duration,
    /// Every measured transaction, when a latency log was asked for.
    pub samples: Vec<Sample>,
    /// Open loop: how long after its intended start the driver began each transaction that
    /// ended in the window: its timer's resolution and its own delays, and, when the engine
    /// falls behind, the wait for the terminal's previous transaction. Part of the latency.
    pub late_us: Histogram<u64>,
}

/// When the window opens and closes, relative to the start of the run.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub warmup: Duration,
    pub seconds: Duration,
}

/// The shared state of a run: its clock, and the count of transactions for the progress bar.
pub struct Clock {
    pub started: Instant,
    /// `started` as Unix time in µs, for the latency log.
    pub started_unix_us: u64,
    pub schedule: Schedule,
    pub completed: AtomicU64,
    pub stop: AtomicBool,
}

impl Clock {
    pub fn new(schedule: Schedule) -> Clock {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock {
            started: Instant::now(),
            started_unix_us: unix,
            schedule,
            completed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    pub fn window_start(&self) -> Instant {
        self.started + self.schedule.warmup
    }

    pub fn window_end(&self) -> Instant {
        self.window_start() + self.schedule.seconds
    }
}

/// The specification's keying time before (clause 5.2.5.2) and mean think time after
/// (5.2.5.4) a transaction of each kind.
fn keying_and_think(kind: Kind) -> (Duration, Duration) {
    let s = Duration::from_secs;
    match kind {
        Kind::NewOrder => (s(18), s(12)),
        Kind::Payment => (s(3), s(12)),
        Kind::OrderStatus => (s(2), s(10)),
        Kind::Delivery => (s(2), s(5)),
        Kind::StockLevel => (s(2), s(5)),
    }
}

/// Sleeps `pause`, or until the run stops.
fn wait(clock: &Clock, pause: Duration) {
    let until = Instant::now() + pause;
    while !clock.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
    }
}

/// One terminal's figures as its transactions end.
struct Recorder {
    driven: Driven,
    window: (Instant, Instant),
    index: u32,
    keep_samples: bool,
}

impl Recorder {
    fn new(clock: &Clock, index: u32, keep_samples: bool) -> Recorder {
        Recorder {
            driven: Driven {
                types: BTreeMap::new(),
                per_second: vec![0; clock.schedule.seconds.as_secs().max(1) as usize],
                driver_cpu: Duration::ZERO,
                tallies: Tallies::default(),
                errors_total: 0,
                first_errors: Vec::new(),
                unfinished: 0,
                unfinished_oldest: Duration::ZERO,
                samples: Vec::new(),
                late_us: new_histogram(),
            },
            window: (clock.window_start(), clock.window_end()),
            index,
            keep_samples,
        }
    }

    /// Counts a transaction that ran from `start` (its intended start, in an open loop) to
    /// `end`, begun `late` after `start`; true when it ended in the window.
    fn record(
        &mut self,
        clock: &Clock,
        txn: &Txn,
        result: &Result<Answer>,
        (start, end): (Instant, Instant),
        late: Duration,
    ) -> Result<bool> {
        let (window_start, window_end) = self.window;
        let driven = &mut self.driven;
        let kind = txn.kind();
        let (outcome, status) = match result {
            Ok(answer) => (outcome(txn, answer), answer.status),
            Err(_) => (Outcome::Error, 0),
        };
        if outcome != Outcome::Error {
            driven
                .tallies
                .count(txn, result.as_ref().expect("an answer"))?;
        } else {
            driven.errors_total += 1;
            if driven.first_errors.len() < 5 {
                driven.first_errors.push(match result {
                    Ok(a) => format!("{}: {} {}", kind.name(), a.status, a.body),
                    Err(e) => format!("{}: {e:#}", kind.name()),
                });
            }
        }
        clock.completed.fetch_add(1, Ordering::Relaxed);
        if start < window_end && end > window_end {
            driven.unfinished += 1;
            driven.unfinished_oldest = driven.unfinished_oldest.max(window_end - start);
        }
        if end < window_start || end > window_end {
            return Ok(false);
        }
        driven.late_us.saturating_record(late.as_micros() as u64);
        let latency_us = (end - start).as_micros() as u64;
        let figures = driven.types.entry(kind).or_insert_with(TypeFigures::new);
        match outcome {
            Outcome::RolledBack => figures.rollbacks += 1,
            Outcome::Error => figures.errors += 1,
            Outcome::Committed => {}
        }
        if outcome != Outcome::Error {
            figures.latency_us.saturating_record(latency_us.max(1));
            let second = (end - window_start).as_secs() as usize;
            if let Some(slot) = driven.per_second.get_mut(second) {
                *slot += 1;
            }
        }
        if self.keep_samples {
            driven.samples.push(Sample {
                start_us: (start - clock.started).as_micros() as u64,
                terminal: self.index,
                kind,
                latency_us,
                outcome,
                status,
            });
        }
        Ok(true)
    }
}

/// A terminal's pause after a transaction: negative exponential around `mean`, truncated at
/// 10 times the mean (clause 5.2.5.4).
fn think_time(rng: &mut Rng, mean: Duration) -> Duration {
    let r = (rng.uniform(1, 1_000_000) as f64) / 1_000_000.0;
    mean.mul_f64((-r.ln()).min(10.0))
}

/// One terminal's loop on a thread of its own, until the clock stops it.
pub fn terminal(
    engine: &dyn Engine,
    clock: &Clock,
    mut terminal: Terminal,
    index: u32,
    pacing: Pacing,
    keep_samples: bool,
) -> Result<Driven> {
    let mut connection = engine.connect()?;
    let mut pace = Pace::new(pacing, clock, index);
    let mut recorder = Recorder::new(clock, index, keep_samples);
    let mut cpu_after_call = thread_cpu();
    while !clock.stop.load(Ordering::Relaxed) {
        let txn: Txn = terminal.next();
        let (pause, intended) = pace.before(txn.kind());
        if let Some(pause) = pause {
            wait(clock, pause);
            if clock.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let now = LOAD_TIME + clock.started.elapsed().as_micros() as i64;
        let cpu_before_call = thread_cpu();
        let start = Instant::now();
        let result = connection.call(&txn, now);
        let end = Instant::now();
        let cpu_end = thread_cpu();
        let (from, late) = from_intended(start, intended);
        if recorder.record(clock, &txn, &result, (from, end), late)? {
            // Dealing, timing and counting since the previous call ended.
            recorder.driven.driver_cpu += cpu_before_call.saturating_sub(cpu_after_call);
        }
        cpu_after_call = cpu_end;
        if let Some(pause) = pace.after(txn.kind()) {
            wait(clock, pause);
        }
    }
    Ok(recorder.driven)
}

/// Where a transaction's latency counts from: its intended start in an open loop (and how late
/// it began), else when it began.
fn from_intended(start: Instant, intended: Option<Instant>) -> (Instant, Duration) {
    match intended {
        Some(intended) => (
            intended.min(start),
            start.saturating_duration_since(intended),
        ),
        None => (start, Duration::ZERO),
    }
}

/// Sleeps `pause` on the event loop, or until the run stops.
async fn wait_async(clock: &Clock, pause: Duration) {
    let until = Instant::now() + pause;
    while !clock.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        tokio::time::sleep((until - now).min(Duration::from_millis(100))).await;
    }
}

/// One terminal's loop as a task of an event loop, over HTTP to `address`, until the clock
/// stops it: the same transactions, timing and counting as `terminal`. The driver's CPU is then
/// its whole process's (what the report counts for HTTP engines), not counted here.
pub async fn terminal_http(
    address: std::net::SocketAddr,
    clock: std::sync::Arc<Clock>,
    mut terminal: Terminal,
    index: u32,
    pacing: Pacing,
    keep_samples: bool,
) -> Result<Driven> {
    let mut client = AsyncClient::connect(address).await?;
    let mut pace = Pace::new(pacing, &clock, index);
    let mut recorder = Recorder::new(&clock, index, keep_samples);
    let mut body = String::new();
    while !clock.stop.load(Ordering::Relaxed) {
        let txn: Txn = terminal.next();
        let (pause, intended) = pace.before(txn.kind());
        if let Some(pause) = pause {
            wait_async(&clock, pause).await;
            if clock.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let now = LOAD_TIME + clock.started.elapsed().as_micros() as i64;
        let start = Instant::now();
        let (method, path, json) = txn.http(now);
        body.clear();
        if let Some(json) = json {
            use std::fmt::Write as _;
            write!(body, "{json}").expect("a String takes any text");
        }
        let result = client
            .send(method, &path, &body)
            .await
            .map(|(status, body)| Answer { status, body });
        let end = Instant::now();
        let (from, late) = from_intended(start, intended);
        recorder.record(&clock, &txn, &result, (from, end), late)?;
        if let Some(pause) = pace.after(txn.kind()) {
            wait_async(&clock, pause).await;
        }
    }
    Ok(recorder.driven)
}

fn outcome(txn: &Txn, answer: &Answer) -> Outcome {
    match (txn, answer.status) {
        (_, 200) => Outcome::Committed,
        (Txn::NewOrder(_), 422) if answer.body["rolled_back"] == true => Outcome::RolledBack,
        _ => Outcome::Error,
    }
}

impl Driven {
    /// All terminals' figures as one.
    pub fn merge(mut all: Vec<Driven>) -> Result<Driven> {
        let mut total = all.pop().expect("at least one terminal");
        for d in all {
            for (kind, figures) in &d.types {
                total
                    .types
                    .entry(*kind)
                    .or_insert_with(TypeFigures::new)
                    .merge(figures)?;
            }
            for (slot, n) in total.per_second.iter_mut().zip(&d.per_second) {
                *slot += n;
            }
            total.driver_cpu += d.driver_cpu;
            total.tallies.merge(&d.tallies);
            total.errors_total += d.errors_total;
            total.unfinished += d.unfinished;
            total.unfinished_oldest = total.unfinished_oldest.max(d.unfinished_oldest);
            for e in d.first_errors {
                if total.first_errors.len() < 5 {
                    total.first_errors.push(e);
                }
            }
            total.samples.extend(d.samples);
            total.late_us.add(&d.late_us)?;
        }
        total.samples.sort_by_key(|s| (s.start_us, s.terminal));
        Ok(total)
    }

    /// Transactions completed (committed or rolled back as the mix asks) in the window.
    pub fn transactions(&self) -> u64 {
        self.types.values().map(|f| f.latency_us.len()).sum()
    }

    /// Transactions that failed in the window.
    pub fn errors(&self) -> u64 {
        self.types.values().map(|f| f.errors).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Terminals together offer the rate: each every `terminals / rate`, their first starts
    /// spread over one interval.
    #[test]
    fn an_open_loop_spreads_its_terminals_over_the_interval() {
        for i in 0..4 {
            let Pacing::Rate { first, interval } = Pacing::open(200.0, i, 4) else {
                panic!("an open loop");
            };
            assert_eq!(interval, Duration::from_millis(20));
            assert_eq!(first, Duration::from_millis(5 * i as u64));
        }
    }

    /// A terminal that fell behind keeps its schedule: the next transaction is meant to start
    /// when it was due, not when the last ended, so the wait it could not avoid is counted.
    #[test]
    fn a_late_terminal_keeps_its_schedule() {
        let mut clock = Clock::new(Schedule {
            warmup: Duration::ZERO,
            seconds: Duration::from_secs(1),
        });
        // Ten seconds ago: every start is overdue.
        clock.started -= Duration::from_secs(10);
        let mut pace = Pace::new(Pacing::open(100.0, 1, 2), &clock, 1);
        for k in 0..5u32 {
            let (pause, intended) = pace.before(Kind::Payment);
            assert_eq!(pause, Some(Duration::ZERO), "overdue: no wait");
            assert_eq!(
                intended,
                Some(clock.started + Duration::from_millis(10) + Duration::from_millis(20) * k)
            );
            assert_eq!(pace.after(Kind::Payment), None, "no think time");
        }
        let begun = clock.started + Duration::from_millis(75);
        assert_eq!(
            from_intended(begun, Some(clock.started + Duration::from_millis(70))),
            (
                clock.started + Duration::from_millis(70),
                Duration::from_millis(5)
            )
        );
        assert_eq!(from_intended(begun, None), (begun, Duration::ZERO));
    }
}
