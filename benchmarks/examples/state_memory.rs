//! The scoreboard's state in one process, without HTTP, the log or checkpoints: what each
//! player costs the tables (its row and its `by_best` entry), as the allocator counts it, as
//! its size classes hold it, and as the resident set grows (research note 025).
//!
//! `cargo run --release -p pure-bench --example state_memory -- [PLAYERS] [--no-index]
//! [--same-thread]`
//!
//! Players are posted as `pure-bench scoreboard-memory` posts them: 8 streams of ascending
//! names, interleaved, with a snapshot every 14 posts (the group size at 8 connections) dropped
//! on another thread when the next replaces it, as the syncer does (`--same-thread`: on the
//! writing thread, which shows what freeing across threads costs).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use pure_lang::{App, Request, Tables, WriteSet};
use serde_json::json;

unsafe extern "C" {
    fn mi_usable_size(p: *const std::ffi::c_void) -> usize;
}

static ASKED: AtomicIsize = AtomicIsize::new(0);
static USABLE: AtomicIsize = AtomicIsize::new(0);
static INNER: pure_runtime::Allocator = pure_runtime::Allocator;

/// pure-serve's allocator, counting what is asked of it and what it gives.
struct Counting;

// SAFETY: every call goes to the inner allocator unchanged; the counters only read.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { INNER.alloc(layout) };
        ASKED.fetch_add(layout.size() as isize, Relaxed);
        USABLE.fetch_add(unsafe { mi_usable_size(p.cast()) } as isize, Relaxed);
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        ASKED.fetch_sub(layout.size() as isize, Relaxed);
        USABLE.fetch_sub(unsafe { mi_usable_size(p.cast()) } as isize, Relaxed);
        unsafe { INNER.dealloc(p, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn resident() -> isize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: isize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let players: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(500_000);
    let indexed = !args.iter().any(|a| a == "--no-index");
    let same_thread = args.iter().any(|a| a == "--same-thread");
    let app = App::load(std::path::Path::new("apps/scoreboard"))?;
    let mut tables = Tables::new(app.schema().tables.len());
    if indexed {
        tables
            .set_indexes(app.indexes().to_vec())
            .map_err(anyhow::Error::msg)?;
    }
    let (retired, dropped) = std::sync::mpsc::channel::<Tables>();
    let dropper = std::thread::spawn(move || dropped.into_iter().for_each(drop));
    let mut ws = WriteSet::default();
    let mut held: Option<Tables> = None;
    let before = (ASKED.load(Relaxed), USABLE.load(Relaxed), resident());
    let per = players.div_ceil(8);
    let mut posted = 0u64;
    for k in 0..per {
        for stream in 0..8 {
            let p = stream * per + k;
            if p >= players {
                continue;
            }
            let body = json!({"player": format!("player-{p:010}"), "score": p % 100_000});
            let request = Request {
                body: pure_lang::to_dynamic(&body),
                ..Request::default()
            };
            app.run_write("post_score", &request, &mut tables, &mut ws)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            ws.clear();
            posted += 1;
            if posted.is_multiple_of(14) {
                if let Some(old) = held.replace(tables.snapshot()) {
                    if same_thread {
                        drop(old);
                    } else {
                        retired.send(old)?;
                    }
                }
            }
        }
    }
    drop(held);
    drop(retired);
    dropper.join().expect("the dropper thread");
    let after = (ASKED.load(Relaxed), USABLE.load(Relaxed), resident());
    let per_player = |b: isize, a: isize| (a - b) as f64 / players as f64;
    println!(
        "{players} players{}: {:.1} bytes asked per player, {:.1} in the allocator's size classes, {:.1} resident",
        if indexed { "" } else { " (no index)" },
        per_player(before.0, after.0),
        per_player(before.1, after.1),
        per_player(before.2, after.2),
    );
    Ok(())
}
