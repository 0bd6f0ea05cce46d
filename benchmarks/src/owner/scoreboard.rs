//! Part 4 of `pure-bench owner`: the scoreboard app's `post_score` handler in-process, without
//! HTTP and without the log, with a snapshot per group as the owner takes one.

use std::time::Duration;

use anyhow::{bail, Context};
use pure_lang::{App, Limits, Request, Tables, WriteSet};
use pure_runtime::record;
use pure_store::sim::SimRng;
use serde_json::json;

use super::timer::{Snapshots, Timer};
use super::{body, Args};

/// Posts per snapshot in the scoreboard part: the group size pure-serve reaches at 64
/// connections on this machine (docs/research/002).
const SCOREBOARD_GROUP: usize = 14;

/// µs per `post_score` call of the scoreboard app on 10,000 players, without HTTP and without the
/// log: the handler, its write set's encoding, and a snapshot every `SCOREBOARD_GROUP` calls as
/// the owner takes one per group. With `--variant script`, only a fixed number of calls (for
/// callgrind); `--variant load` stops after loading.
pub(super) fn run(args: &Args) -> anyhow::Result<()> {
    println!("## owner: the scoreboard's post_score handler (µs per call)\n");
    let limits = match args.variant {
        Some(_) => Limits {
            wall_clock_max: Duration::from_secs(60),
            ..Limits::default()
        },
        None => Limits::default(),
    };
    let mut app = App::load_with(&args.app, limits)
        .with_context(|| format!("loading {}", args.app.display()))?;
    app.set_interpreted(args.interpreted);
    const PLAYERS: u64 = 10_000;
    let post = |player: u64, score: u64| {
        body(json!({"player": format!("player-{player}"), "score": score}))
    };
    let mut tables = Tables::new(app.schema().tables.len());
    // The app's declared indexes, kept by every post as the runtime keeps them.
    tables
        .set_indexes(app.indexes().to_vec())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut ws = WriteSet::default();
    let mut record_bytes = Vec::new();
    for p in 0..PLAYERS {
        app.run_write("post_score", &post(p, 0), &mut tables, &mut ws)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        ws.clear();
    }
    let mut rng = SimRng::new(7);
    let requests: Vec<Request> = (0..args.batch)
        .map(|_| post(rng.below(PLAYERS), rng.below(1_000_000)))
        .collect();
    let mut call = |i: usize, tables: &mut Tables, snapshots: &mut Snapshots| {
        if i.is_multiple_of(SCOREBOARD_GROUP) {
            snapshots.take(tables);
        }
        app.run_write("post_score", &requests[i % requests.len()], tables, &mut ws)
            .expect("the handler runs");
        record::encode_writes(&mut record_bytes, ws.changes());
        record_bytes.clear();
        ws.clear();
    };
    let mut snapshots = Snapshots::new();
    snapshots.take(&mut tables);
    match args.variant.as_deref() {
        Some("load") => return Ok(()),
        Some("script") => {
            for i in 0..args.batch * args.batches {
                call(i, &mut tables, &mut snapshots);
            }
            println!("ran {} calls", args.batch * args.batches);
            return Ok(());
        }
        Some(other) => bail!("--variant for the scoreboard part is script or load, not {other}"),
        None => {}
    }
    let mut timer = Timer::new();
    let mut i = 0;
    for round in 0..args.batches + 1 {
        timer.time(args.batch, || {
            call(i, &mut tables, &mut snapshots);
            i += 1;
        });
        if round == 0 {
            timer.samples.clear();
        }
    }
    let (lo, hi) = timer.range();
    println!(
        "post_score on {PLAYERS} players, a snapshot every {SCOREBOARD_GROUP} calls: median {:.2} µs per call (batch medians {lo:.2}–{hi:.2})",
        timer.median()
    );
    Ok(())
}
