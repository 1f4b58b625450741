//! What a progress bar says after its bar: how much is done, how fast, for
//! how long, and how much longer. Plain functions of numbers (no terminal, no
//! Python), so that every bar draws the same line (the bar itself is
//! `py/progress.rs`) and these rules are tested here.
//!
//! While running, and when done:
//!
//! ```text
//! counting [=======>            ] 52.4 MB/1.20 GB, 104 MB/s, 3s, eta 11s
//! counting [====================] 1.20 GB/1.20 GB, 104 MB/s, in 11.5s
//!  merging [=========>          ] 15,872/31,744 merges, 5.61k/s, 2s
//! ```
//!
//! The rules:
//! - the rate is the recent one: the average over the last [`WINDOW`] (10 s),
//!   or since the start before that ([`Rate`]);
//! - it is shown once it is known: something is done and at least
//!   [`KNOWN_AFTER`] (1 s) has passed. Before that it is the rate of a block
//!   or two, start-up included (and training's first merges, each rewriting
//!   many words, are the slowest);
//! - the ETA is shown once the rate is known and at least [`ETA_FROM`] (3%)
//!   of the total is done: the rest divided by the rate. Without that rule
//!   a 3 s training started with "eta 17m". Only for work at a steady
//!   [`Pace`]: merging gets faster as it goes, and gets none;
//! - rates to 3 significant figures: bytes in decimal units ("12.3 MB/s"),
//!   other things with k, M, G ("5.61k/s");
//! - counts of things exact, with thousands separators ("1,234,567");
//!   bytes to 3 significant figures ("52.4 MB");
//! - the time taken: whole seconds while running (rounded down: "0s" is
//!   less than a second), to a tenth of a second at the end ("in 3.2s"),
//!   with the average rate over the whole run.

use std::collections::VecDeque;
use std::time::Duration;

/// The rate, and so the ETA, is shown only after this long.
pub const KNOWN_AFTER: Duration = Duration::from_secs(1);

/// The ETA is shown only once this fraction of the total is done.
pub const ETA_FROM: f64 = 0.03;

/// The rate is the average over about this long, the recent past.
pub const WINDOW: Duration = Duration::from_secs(10);

/// What a bar counts.
#[derive(Clone, Debug, PartialEq)]
pub enum Unit {
    /// Bytes: "52.4 MB/1.20 GB, 104 MB/s".
    Bytes,
    /// Things, named by a plural noun: "1,234/31,744 merges, 5.61k/s".
    Items(String),
}

/// Whether the rate so far says how long the rest will take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// About the same throughout (reading, counting, encoding): an ETA.
    Steady,
    /// Faster and faster, so no ETA: merging, where each merge rewrites
    /// fewer words than the one before. Training on 27 MB of FLORES to 20k
    /// tokens made its first 600 merges in 1.3 s and the other 19,000 in
    /// 1.7 s; the ETA at 1.3 s said "46s".
    Speeding,
}

/// A bar's state when it is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    pub done: u64,
    pub total: Option<u64>,
    pub elapsed: Duration,
    /// The recent rate, per second ([`Rate`]).
    pub per_sec: f64,
    pub finished: bool,
}

/// The recent rate: the average over the last [`WINDOW`] of the samples
/// recorded (the bar records one each time it redraws itself, every 200
/// ms), or since the start while the run is younger than that. An average
/// since the start lags a run whose speed changes; indicatif's own estimate
/// (an average of averages) lagged more: a 2 s training said "368/s"
/// one second in, after 1,256 merges.
#[derive(Clone, Debug)]
pub struct Rate {
    /// (time since the start, done), oldest first; the oldest is the newest
    /// that is at least [`WINDOW`] older than the last.
    samples: VecDeque<(Duration, u64)>,
}

impl Default for Rate {
    fn default() -> Self {
        Rate { samples: VecDeque::from([(Duration::ZERO, 0)]) }
    }
}

impl Rate {
    pub fn record(&mut self, elapsed: Duration, done: u64) {
        self.samples.push_back((elapsed, done));
        while self.samples.len() > 2 && elapsed.saturating_sub(self.samples[1].0) >= WINDOW {
            self.samples.pop_front();
        }
    }

    /// Per second, between the oldest sample kept and the last; 0 before
    /// any time has passed.
    pub fn per_sec(&self) -> f64 {
        let (&(t0, d0), &(t1, d1)) = (self.samples.front().unwrap(), self.samples.back().unwrap());
        let secs = (t1 - t0).as_secs_f64();
        if secs > 0.0 {
            d1.saturating_sub(d0) as f64 / secs
        } else {
            0.0
        }
    }
}

/// The text after the bar: amount, rate, time, ETA (see the module's rules).
pub fn stats(unit: &Unit, pace: Pace, s: &Snapshot) -> String {
    let mut parts = vec![amount(unit, s.done, s.total)];
    let secs = s.elapsed.as_secs_f64();
    if s.finished {
        if s.done > 0 && secs > 0.0 {
            parts.push(rate(unit, s.done as f64 / secs));
        }
        parts.push(format!("in {}", took(s.elapsed)));
    } else {
        if rate_known(s.done, s.elapsed, s.per_sec) {
            parts.push(rate(unit, s.per_sec));
        }
        parts.push(clock(s.elapsed.as_secs()));
        if let Some(eta) = eta(s).filter(|_| pace == Pace::Steady) {
            parts.push(format!("eta {}", clock(eta.as_secs_f64().ceil() as u64)));
        }
    }
    parts.join(", ")
}

/// Whether the rate is known: something done, for at least [`KNOWN_AFTER`].
pub fn rate_known(done: u64, elapsed: Duration, per_sec: f64) -> bool {
    done > 0 && elapsed >= KNOWN_AFTER && per_sec.is_finite() && per_sec > 0.0
}

/// The time left, once the rate is known and [`ETA_FROM`] of a known total
/// is done; `None` before, and when nothing is left.
pub fn eta(s: &Snapshot) -> Option<Duration> {
    let total = s.total?;
    let far_enough = s.done as f64 >= ETA_FROM * total as f64;
    if s.finished || s.done >= total || !far_enough || !rate_known(s.done, s.elapsed, s.per_sec) {
        return None;
    }
    Some(Duration::from_secs_f64((total - s.done) as f64 / s.per_sec))
}

/// "52.4 MB/1.20 GB", "1,234/31,744 merges", or without a total "52.4 MB",
/// "1,234 files".
pub fn amount(unit: &Unit, done: u64, total: Option<u64>) -> String {
    match (unit, total) {
        (Unit::Bytes, Some(t)) => format!("{}/{}", bytes(done as f64), bytes(t as f64)),
        (Unit::Bytes, None) => bytes(done as f64),
        (Unit::Items(noun), Some(t)) => format!("{}/{} {noun}", count(done), count(t)),
        (Unit::Items(noun), None) => format!("{} {noun}", count(done)),
    }
}

/// "12.3 MB/s" or "5.61k/s".
pub fn rate(unit: &Unit, per_sec: f64) -> String {
    match unit {
        Unit::Bytes => format!("{}/s", bytes(per_sec)),
        Unit::Items(_) => {
            let (figures, k) = three_figures(per_sec, false);
            format!("{figures}{}/s", ["", "k", "M", "G", "T", "P"][k])
        }
    }
}

/// Bytes in decimal units, to 3 significant figures: "512 B", "1.00 kB",
/// "52.4 MB", "1.20 GB".
pub fn bytes(n: f64) -> String {
    let (figures, k) = three_figures(n, true);
    format!("{figures} {}B", ["", "k", "M", "G", "T", "P"][k])
}

/// `x` as x' * 1000^k with x' below 1000, x' to 3 significant figures
/// (whole below 1000 if `whole_units`: there is no tenth of a byte).
fn three_figures(x: f64, whole_units: bool) -> (String, usize) {
    let (mut x, mut k) = (x.max(0.0), 0);
    // 999.5 would round to "1000": it is "1.00" of the next unit.
    while x >= 999.5 && k < 5 {
        x /= 1000.0;
        k += 1;
    }
    let decimals = match x {
        _ if k == 0 && whole_units => 0,
        x if x >= 99.95 => 0,
        x if x >= 9.995 => 1,
        _ => 2,
    };
    (format!("{x:.decimals$}"), k)
}

/// `n` with thousands separators: "1,234,567".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits.as_bytes().rchunks(3).rev().map(|g| std::str::from_utf8(g).unwrap()).collect();
    groups.join(",")
}

/// Whole seconds as "0s", "59s", "1m05s", "2h03m".
pub fn clock(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The time a finished run took: "0.03s", "3.2s", or from a minute on as
/// [`clock`] says it.
pub fn took(d: Duration) -> String {
    let secs = d.as_secs_f64();
    match secs {
        s if s < 0.995 => format!("{s:.2}s"),
        s if s < 59.95 => format!("{s:.1}s"),
        s => clock(s.round() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(done: u64, total: Option<u64>, secs: f64, per_sec: f64) -> Snapshot {
        Snapshot { done, total, elapsed: Duration::from_secs_f64(secs), per_sec, finished: false }
    }

    #[test]
    fn eta_only_after_a_second_and_three_percent() {
        // The reported case: well under a second in, a rate from a few slow
        // first merges (here 40/s for 31,744 merges would say "13m").
        assert_eq!(eta(&snap(2, Some(31_744), 0.05, 40.0)), None);
        // Half done but not a second in: no ETA.
        assert_eq!(eta(&snap(500, Some(1000), 0.99, 500.0)), None);
        // A second in, 2.9% done: no ETA; 3% done: the rest over the rate.
        assert_eq!(eta(&snap(29, Some(1000), 1.5, 20.0)), None);
        assert_eq!(eta(&snap(30, Some(1000), 1.5, 20.0)), Some(Duration::from_secs_f64(970.0 / 20.0)));
        // No total, no rate, nothing left, or finished: no ETA.
        assert_eq!(eta(&snap(30, None, 5.0, 20.0)), None);
        assert_eq!(eta(&snap(30, Some(1000), 5.0, 0.0)), None);
        assert_eq!(eta(&snap(1000, Some(1000), 5.0, 20.0)), None);
        assert_eq!(eta(&Snapshot { finished: true, ..snap(500, Some(1000), 5.0, 20.0) }), None);
    }

    #[test]
    fn rate_is_the_average_of_the_last_ten_seconds() {
        let mut r = Rate::default();
        assert_eq!(r.per_sec(), 0.0);
        // A run that speeds up: 10/s for 20 s, then 100/s.
        let mut done = 0;
        for tenth in 1..=400u64 {
            done += if tenth <= 200 { 1 } else { 10 };
            r.record(Duration::from_millis(tenth * 100), done);
            if tenth == 50 {
                assert!((r.per_sec() - 10.0).abs() < 1e-9); // since the start
            }
            if tenth == 250 {
                assert!((r.per_sec() - 55.0).abs() < 1e-9); // half and half
            }
        }
        assert!((r.per_sec() - 100.0).abs() < 1e-9); // the last 10 s only
        assert!(r.samples.len() <= 102);
    }

    #[test]
    fn rate_known_after_a_second_with_something_done() {
        assert!(!rate_known(100, Duration::from_millis(999), 100.0));
        assert!(rate_known(100, Duration::from_secs(1), 100.0));
        assert!(!rate_known(0, Duration::from_secs(5), 100.0));
        assert!(!rate_known(100, Duration::from_secs(5), f64::INFINITY));
    }

    #[test]
    fn rates_have_three_significant_figures() {
        let items = Unit::Items("merges".into());
        assert_eq!(rate(&items, 5611.4005), "5.61k/s"); // the reported "5,611.4005/s"
        assert_eq!(rate(&items, 0.5), "0.50/s");
        assert_eq!(rate(&items, 56.14), "56.1/s");
        assert_eq!(rate(&items, 561.4), "561/s");
        assert_eq!(rate(&items, 999.4), "999/s");
        assert_eq!(rate(&items, 999.5), "1.00k/s"); // not "1000/s"
        assert_eq!(rate(&items, 56_149.0), "56.1k/s");
        assert_eq!(rate(&items, 2.5e6), "2.50M/s");
        assert_eq!(rate(&Unit::Bytes, 12_345_678.9), "12.3 MB/s");
        assert_eq!(rate(&Unit::Bytes, 104e6), "104 MB/s");
        assert_eq!(rate(&Unit::Bytes, 999.6e6), "1.00 GB/s");
        assert_eq!(rate(&Unit::Bytes, 5.5), "6 B/s"); // whole bytes
    }

    #[test]
    fn bytes_and_counts() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1000.0), "1.00 kB");
        assert_eq!(bytes(52_400_000.0), "52.4 MB");
        assert_eq!(bytes(1_199_999_999.0), "1.20 GB");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(amount(&Unit::Items("merges".into()), 1234, Some(31_744)), "1,234/31,744 merges");
        assert_eq!(amount(&Unit::Items("files".into()), 12, None), "12 files");
    }

    #[test]
    fn times() {
        assert_eq!(clock(0), "0s");
        assert_eq!(clock(59), "59s");
        assert_eq!(clock(65), "1m05s");
        assert_eq!(clock(7380), "2h03m");
        assert_eq!(took(Duration::from_millis(31)), "0.03s");
        assert_eq!(took(Duration::from_millis(3249)), "3.2s");
        assert_eq!(took(Duration::from_millis(59_960)), "1m00s");
    }

    #[test]
    fn whole_lines() {
        let items = Unit::Items("merges".into());
        // Early: no rate, no ETA.
        assert_eq!(stats(&items, Pace::Steady, &snap(2, Some(31_744), 0.05, 40.0)), "2/31,744 merges, 0s");
        // Later: rate, elapsed (rounded down), ETA (rounded up).
        assert_eq!(
            stats(&items, Pace::Steady, &snap(15_872, Some(31_744), 2.8, 5611.4005)),
            "15,872/31,744 merges, 5.61k/s, 2s, eta 3s"
        );
        assert_eq!(
            stats(&Unit::Bytes, Pace::Steady, &snap(52_400_000, Some(1_200_000_000), 3.0, 104e6)),
            "52.4 MB/1.20 GB, 104 MB/s, 3s, eta 12s"
        );
        // Merging: the same, but never an ETA.
        assert_eq!(
            stats(&items, Pace::Speeding, &snap(15_872, Some(31_744), 2.8, 5611.4005)),
            "15,872/31,744 merges, 5.61k/s, 2s"
        );
        // At the end: the average rate and the time taken.
        let done = Snapshot { finished: true, ..snap(1_200_000_000, Some(1_200_000_000), 11.54, 0.0) };
        assert_eq!(stats(&Unit::Bytes, Pace::Steady, &done), "1.20 GB/1.20 GB, 104 MB/s, in 11.5s");
        let empty = Snapshot { finished: true, ..snap(0, Some(0), 0.001, 0.0) };
        assert_eq!(stats(&Unit::Bytes, Pace::Steady, &empty), "0 B/0 B, in 0.00s");
    }
}
