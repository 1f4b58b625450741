//! The one progress bar every command draws on stderr (training's counting
//! and merging, encoding, and whatever Python drives): an indicatif bar whose
//! words `crate::progress` writes, and `Progress`, the same bar for Python.

use std::fmt::Write;
use std::time::{Duration, Instant};

use indicatif::style::ProgressTracker;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};
use pyo3::prelude::*;

use crate::progress::{count, stats, Pace, Rate, Snapshot, Unit};

/// A bar for `what` ("counting", "merging", "encoding"), out of `total` if
/// known. Drawn only if `show` and stderr is a terminal (indicatif's rule).
///
/// It redraws itself every 200 ms, so that the time and ETA move between
/// updates that come seconds apart. Its `msg` is an extra count after the
/// line (`Progress`'s tokens). Dropped or abandoned, it leaves its last line
/// as it stands (position included: a training that ran out of pairs
/// before the target says how far it got).
pub(super) fn bar(what: &str, total: Option<u64>, unit: Unit, pace: Pace, show: bool) -> ProgressBar {
    let target = if show { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let template = match total {
        Some(_) => "{prefix:>9} [{bar:20}] {stats}{msg}",
        None => "{prefix:>9} {spinner} {stats}{msg}",
    };
    let style = ProgressStyle::with_template(template)
        .expect("a valid template")
        .progress_chars("=> ")
        .with_key("stats", Stats { unit, pace, rate: Rate::default() });
    let pb = ProgressBar::with_draw_target(total, target)
        .with_style(style)
        .with_prefix(what.to_string())
        .with_finish(ProgressFinish::Abandon);
    if !pb.is_hidden() {
        pb.enable_steady_tick(Duration::from_millis(200));
    }
    pb
}

/// The `{stats}` of the template: `crate::progress::stats`, with the rate
/// that this keeps from the bar's redraws.
#[derive(Clone)]
struct Stats {
    unit: Unit,
    pace: Pace,
    rate: Rate,
}

impl ProgressTracker for Stats {
    fn clone_box(&self) -> Box<dyn ProgressTracker> {
        Box::new(self.clone())
    }

    /// At each of the bar's redraws, every 200 ms (not at each update: the
    /// merge loop's come many thousands of times a second).
    fn tick(&mut self, state: &ProgressState, _: Instant) {
        self.rate.record(state.elapsed(), state.pos());
    }

    fn reset(&mut self, _: &ProgressState, _: Instant) {
        self.rate = Rate::default();
    }

    fn write(&self, state: &ProgressState, w: &mut dyn Write) {
        let snapshot = Snapshot {
            done: state.pos(),
            total: state.len(),
            elapsed: state.elapsed(),
            per_sec: self.rate.per_sec(),
            finished: state.is_finished(),
        };
        let _ = w.write_str(&stats(&self.unit, self.pace, &snapshot));
    }
}

/// The bar, for Python (`bpe.progress.Progress` is its face): `update` with
/// the absolute position (cheap: a store, and a redraw at most 20 times a
/// second), then `finish`, which leaves the last line with the time taken.
#[pyclass(module = "bpe._core", frozen)]
pub(super) struct Progress {
    bar: ProgressBar,
}

#[pymethods]
impl Progress {
    /// `unit`: "bytes", or the plural noun of the things counted ("items",
    /// "files"). `show`: None or True draw when stderr is a terminal.
    #[new]
    #[pyo3(signature = (what, total=None, unit="bytes", show=None))]
    fn new(what: &str, total: Option<u64>, unit: &str, show: Option<bool>) -> Self {
        let unit = if unit == "bytes" { Unit::Bytes } else { Unit::Items(unit.to_string()) };
        Progress { bar: bar(what, total, unit, Pace::Steady, show.unwrap_or(true)) }
    }

    /// `done` so far; `tokens`, if given, is shown after the line.
    #[pyo3(signature = (done, tokens=None))]
    fn update(&self, done: u64, tokens: Option<u64>) {
        self.bar.set_position(done);
        if let Some(t) = tokens {
            self.bar.set_message(format!(", {} tokens", count(t)));
        }
    }

    /// Stops the bar where it is and draws its last line. Idempotent.
    fn finish(&self) {
        if !self.bar.is_finished() {
            self.bar.abandon();
        }
    }
}
