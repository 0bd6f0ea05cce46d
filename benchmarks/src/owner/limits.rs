//! Part 0 of `pure-bench owner`: how soon the default limits stop a runaway handler (a loop,
//! a recursion, a growing string or array, a native call in a loop), in-process.

use std::time::{Duration, Instant};

use pure_lang::{App, Dynamic, Fields, Key, Limits, Request, Tables, WriteSet};

const RUNAWAY_SCRIPT: &str = r#"
fn spin(req) { let n = 0; loop { n += 1; } }
fn recurse(req) { recurse(req) }
fn grow(req) { let s = "x"; loop { s += s; } }
fn big_array(req) { let a = []; loop { a.push(1); } }
fn slow_native(req) { loop { counters.scan((), (), 10000); } }
"#;

pub(super) fn run() -> anyhow::Result<()> {
    println!("## owner: how soon the default limits stop a runaway handler\n");
    println!("| handler | stopped by | after ms |");
    println!("|---|---|---:|");
    let files: Vec<(String, String)> = vec![("runaway.rhai".into(), RUNAWAY_SCRIPT.into())];
    let manifest =
        r#"{ "name": "runaway", "routes": {}, "tables": { "counters": ["n", "total"] } }"#;
    let app = App::from_sources(manifest, files.clone(), Limits::default())?;
    let mut tables = Tables::new(app.schema().tables.len());
    let mut ws = WriteSet::default();
    let counters = app.schema().table_id("counters").expect("declared");
    for k in 0..10_000 {
        tables
            .put(
                &mut ws,
                counters,
                Key::int(k),
                Fields::from_values(&[Dynamic::from_int(0), Dynamic::from_int(0)]),
                true,
            )
            .map_err(anyhow::Error::msg)?;
        ws.clear();
    }
    let operations_only = Limits {
        wall_clock_max: Duration::from_secs(60),
        ..Limits::default()
    };
    let counted = App::from_sources(manifest, files, operations_only)?;
    let started = Instant::now();
    let error = counted.run_write("spin", &Request::default(), &mut tables, &mut ws);
    println!(
        "| spin, operation limit only | {} | {:.1} |",
        error
            .err()
            .map_or_else(|| "nothing".into(), |e| e.to_string()),
        started.elapsed().as_secs_f64() * 1e3
    );
    for handler in ["spin", "recurse", "grow", "big_array", "slow_native"] {
        let started = Instant::now();
        let error = app
            .run_write(handler, &Request::default(), &mut tables, &mut ws)
            .expect_err("a runaway handler is stopped");
        let stopped = match &error {
            pure_lang::HandlerError::Limit { limit, .. } => limit.clone(),
            other => format!("{other}"),
        };
        println!(
            "| {handler} | {stopped} | {:.1} |",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    println!();
    Ok(())
}
