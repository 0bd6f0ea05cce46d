//! TPC-C: one population and one request stream for every engine (`population`, `input`, drawn
//! from `rng`), the rows they share (`rows`), the SQLite twin of the app (`sqlite`), the
//! consistency conditions (`check`) and the equality run (`equal`). Pure runs over HTTP
//! (`pure`: import files, a transaction as a request) or in-process (`inprocess`); `compiled`,
//! a test, runs the app compiled against Rhai on a small population.

pub mod check;
#[cfg(test)]
mod compiled;
pub mod equal;
pub mod inprocess;
pub mod input;
pub mod matrix;
pub mod plot;
pub mod population;
pub mod pure;
pub mod rng;
pub mod rows;
pub mod sqlite;
pub mod timed;

/// A transaction's answer as the app gives it: the HTTP status and the JSON body. The SQLite
/// twin answers the same shapes, so that an equality run compares answers as well as tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: serde_json::Value,
}

/// `pure-bench tpcc-load`: the population as `pure-serve import` files, or as a SQLite file.
#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    /// Warehouses (each 100,000 stock rows, 30,000 customers, ...; the 100,000 items once).
    #[arg(long, default_value_t = 1)]
    warehouses: i64,
    /// Seed of the population: the same seed, the same rows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the files, one `<table>.jsonl` per table (created).
    #[arg(long, required_unless_present = "sqlite", conflicts_with = "sqlite")]
    out: Option<std::path::PathBuf>,
    /// Write a new SQLite database of the twin's schema instead, in the page size and journal
    /// mode of the settings below.
    #[arg(long, value_name = "FILE")]
    sqlite: Option<std::path::PathBuf>,
    #[command(flatten)]
    settings: crate::harness::sqlite::SqliteOptions,
}

pub fn run_load(args: LoadArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    if let Some(file) = &args.sqlite {
        let report = sqlite::load(
            file,
            &args.settings.settings(),
            args.seed,
            args.warehouses,
            true,
        )?;
        print!("{report}");
        return Ok(());
    }
    let out = args
        .out
        .as_ref()
        .expect("clap requires --out without --sqlite");
    let bar = crate::harness::progress::counter("rows");
    bar.set_length(population::load_counts(args.warehouses).iter().sum());
    let files = pure::write_population(out, args.seed, args.warehouses, &bar)?;
    bar.finish_and_clear();
    let total: u64 = files.iter().map(|(_, n)| n).sum();
    for (path, rows) in &files {
        println!("{:>9} {}", rows, path.display());
    }
    println!(
        "{total} rows in {:.1} s; load them with: pure-serve import apps/tpcc --data DIR {}/*.jsonl",
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}
