//! Progress on stderr while a benchmark runs: spinners and counters (indicatif), so that stdout
//! holds only the figures. Knows nothing of what is being measured but its name.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner naming the subject being measured, with the elapsed and the expected total time.
pub fn timed(total: Duration) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    let style =
        ProgressStyle::with_template("{spinner} measuring {msg:<18} {elapsed} of ~{prefix}")
            .expect("the template is valid");
    bar.set_style(style);
    bar.set_prefix(format!("{}s", total.as_secs_f64().ceil()));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A spinner for untimed preparation (preallocating files, lapping a ring).
pub fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A counter of work done (rows, transactions) with its rate; a bar once given a length.
pub fn counter(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    let style = ProgressStyle::with_template(
        "{spinner} {human_pos}/{human_len} {msg} ({per_sec}, {elapsed})",
    )
    .expect("the template is valid");
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
