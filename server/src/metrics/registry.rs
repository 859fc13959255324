//! The metric primitives and Prometheus' text exposition format (version 0.0.4): counters,
//! histograms with fixed buckets, and a writer for families of samples.
//!
//! Counters and histograms are atomics, updated without locks on the query path; gauges are
//! not stored at all: the endpoint samples the live components when it is scraped
//! (`super::render`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A monotonic count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds (seconds) of the latency histograms' buckets: 1 ms to 5 min.
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A histogram of durations over [`LATENCY_BUCKETS`] (plus `+Inf`).
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative; the last is `+Inf`).
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    /// Sum of the observations in nanoseconds.
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let seconds = d.as_secs_f64();
        let index = LATENCY_BUCKETS
            .iter()
            .position(|upper| seconds <= *upper)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Labels of one sample: `(name, value)` pairs.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// Writes metric families in the text exposition format.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family: its `# HELP` and `# TYPE` lines (`kind`: counter, gauge, histogram).
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        self
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, labels: Labels<'_>, value: f64) -> &mut Self {
        self.out.push_str(name);
        write_labels(&mut self.out, labels, None);
        let _ = writeln!(self.out, " {}", format_value(value));
        self
    }

    /// A counter family with one unlabelled sample.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) -> &mut Self {
        self.family(name, "counter", help)
            .sample(name, &[], value as f64)
    }

    /// A gauge family with one unlabelled sample.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) -> &mut Self {
        self.family(name, "gauge", help).sample(name, &[], value)
    }

    /// The samples of a histogram (after its `family` line): cumulative `_bucket`s, `_sum`
    /// in seconds and `_count`.
    pub fn histogram(&mut self, name: &str, labels: Labels<'_>, h: &Histogram) -> &mut Self {
        let mut cumulative = 0u64;
        let bucket = format!("{name}_bucket");
        for (i, count) in h.buckets.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = LATENCY_BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| format_value(*b));
            self.out.push_str(&bucket);
            write_labels(&mut self.out, labels, Some(&le));
            let _ = writeln!(self.out, " {cumulative}");
        }
        let sum = h.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, cumulative as f64)
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }
}

fn write_labels(out: &mut String, labels: Labels<'_>, le: Option<&str>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    let pairs = labels.iter().copied().chain(le.map(|le| ("le", le)));
    for (name, value) in pairs {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{name}=\"{}\"", escape_label(value));
    }
    out.push('}');
}

/// A sample value: integers without a fraction, the rest as Rust prints them.
fn format_value(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(1000));
        let mut e = Exposition::default();
        e.family("t_seconds", "histogram", "test")
            .histogram("t_seconds", &[("stage", "x")], &h);
        let text = e.finish();
        assert!(text.contains("t_seconds_bucket{stage=\"x\",le=\"0.001\"} 0\n"));
        assert!(text.contains("t_seconds_bucket{stage=\"x\",le=\"0.005\"} 2\n"));
        assert!(text.contains("t_seconds_bucket{stage=\"x\",le=\"300\"} 2\n"));
        assert!(text.contains("t_seconds_bucket{stage=\"x\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("t_seconds_count{stage=\"x\"} 3\n"));
        assert!(
            text.contains("t_seconds_sum{stage=\"x\"} 1000.006\n"),
            "{text}"
        );
    }

    #[test]
    fn labels_are_escaped() {
        let mut e = Exposition::default();
        e.family("c_total", "counter", "a \\ b")
            .sample("c_total", &[("q", "say \"hi\"\n")], 2.0);
        assert_eq!(
            e.finish(),
            "# HELP c_total a \\\\ b\n# TYPE c_total counter\nc_total{q=\"say \\\"hi\\\"\\n\"} 2\n"
        );
    }
}
