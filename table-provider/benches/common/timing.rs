//! Timing for the benchmarks that run their own rounds: wall and CPU time of one run, medians.

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// `name` from the environment as a number (`_` separators allowed), else `default`.
pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// This process's CPU time so far (user + system), from `/proc/self/stat`.
pub(crate) fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 (1-based); `after` starts at field 3.
    let total = ticks(11) + ticks(12);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(total * 10)
}

/// Wall and CPU time of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

/// Runs `f` and measures it.
pub(crate) async fn timed<F: std::future::Future>(f: F) -> (F::Output, Sample) {
    let (wall, cpu) = (Instant::now(), cpu_time());
    let out = f.await;
    let sample = Sample {
        wall: wall.elapsed(),
        cpu: cpu_time().saturating_sub(cpu),
    };
    (out, sample)
}

/// The median (the upper one of an even count); zero when empty.
pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[v.len() / 2]
}

/// The `p` quantile of sorted durations.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
