//! A bounded-time fuzz of what the server decodes from clients before any query runs: signed
//! tickets and prepared-statement handles, bound-parameter IPC streams, and the SQL front end
//! (placeholder and bare-timestamp normalisation, the time-travel rewrite, placeholder order).
//!
//! Inputs are random bytes, random mutations of valid values (bit flips, truncation,
//! extension, splices) and random SQL assembled from tricky fragments, from a seeded generator:
//! a failure prints the seed and the input, and `PETREL_FUZZ_SEED` replays it.
//! `PETREL_FUZZ_SECONDS` bounds each target's time (default 5).
//!
//! Properties: nothing panics and no small input takes seconds; a ticket or handle with any byte changed is refused; a valid one
//! opens to what was sealed, and only for its owner; the SQL passes keep text without their
//! trigger characters unchanged and never lose a string literal's contents.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use petrel_server::auth::Identity;
use petrel_server::memory::ServerMemory;
use petrel_server::parameters::ParameterRows;
use petrel_server::proto::petrel::{PreparedStatementHandle, SessionDefaults};
use petrel_server::sql_text::{normalize_sql, order_placeholders};
use petrel_server::tickets::{TicketSigner, Tickets, batches_to_ipc, statement_ticket};
use petrel_table_provider::rewrite_time_travel;
use prost::Message;
use std::sync::Arc;

/// xorshift64*: small, seedable, good enough to explore inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Random bytes, fewer than `max` of them.
    fn some_bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max);
        self.bytes(n)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn seed() -> u64 {
    std::env::var("PETREL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        })
}

fn budget() -> Duration {
    Duration::from_secs_f64(
        std::env::var("PETREL_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5.0),
    )
}

/// Runs `case` with fresh generator states until the time budget is spent; a panic fails the
/// test naming the seed that reproduces it.
fn fuzz(target: &str, mut case: impl FnMut(&mut Rng)) -> usize {
    let seed = seed();
    let mut rng = Rng(seed);
    let deadline = Instant::now() + budget();
    let mut n = 0;
    while Instant::now() < deadline {
        let case_seed = rng.next() | 1;
        let mut case_rng = Rng(case_seed);
        let started = Instant::now();
        let failed = catch_unwind(AssertUnwindSafe(|| case(&mut case_rng))).is_err();
        if failed {
            panic!("{target}: case failed; replay with PETREL_FUZZ_SEED={seed} (case {n})");
        }
        // A few hundred bytes must not cost seconds (a declared length once allocated 1.4 GB).
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "{target}: one case took {took:?}; replay with PETREL_FUZZ_SEED={seed} (case {n})"
        );
        n += 1;
    }
    eprintln!("{target}: {n} cases (seed {seed})");
    assert!(n > 100, "{target}: only {n} cases ran");
    n
}

/// `valid` changed at random: flips, truncation, extension or a splice of random bytes.
fn mutate(rng: &mut Rng, valid: &[u8]) -> Vec<u8> {
    let mut out = valid.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..=rng.below(3) {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
        }
        1 => out.truncate(rng.below(out.len())),
        2 => {
            let n = 1 + rng.below(16);
            let extra = rng.bytes(n);
            out.extend(extra);
        }
        _ => {
            let at = rng.below(out.len());
            let junk = rng.some_bytes(8);
            out.splice(at..(at + junk.len()).min(out.len()), junk);
        }
    }
    out
}

#[test]
fn tickets_and_handles_refuse_every_change() {
    let signer = TicketSigner::new(b"0123456789abcdef0123456789abcdef").expect("signer");
    let alice = Identity::User("alice".into());
    let bob = Identity::User("bob".into());
    let tickets = Tickets::new(&signer, &alice);
    let others = Tickets::new(&signer, &bob);
    let session = SessionDefaults::default();
    fuzz("statement tickets", |rng| {
        let sql = format!("SELECT {} FROM t", rng.next());
        let t = statement_ticket(&sql, session.clone(), Bytes::from(rng.some_bytes(8)));
        let sealed = tickets.statement(&t).ticket.to_vec();
        // The statement handle inside the Flight ticket's Any.
        let any = arrow_flight::sql::Any::decode(sealed.as_slice()).expect("any");
        let query = arrow_flight::sql::TicketStatementQuery::decode(any.value.as_ref())
            .expect("ticket statement query");
        let handle = query.statement_handle.to_vec();
        let opened = tickets
            .open_statement(&handle)
            .expect("a valid ticket opens");
        assert_eq!(opened.sql, sql);
        assert!(
            others.open_statement(&handle).is_err(),
            "bound to its owner"
        );
        let changed = mutate(rng, &handle);
        if changed != handle {
            assert!(
                tickets.open_statement(&changed).is_err(),
                "a changed ticket opens"
            );
        }
        let _ = tickets.open_statement(&rng.some_bytes(200));
        let _ = tickets.open_write_result(&rng.some_bytes(200));
    });
    fuzz("prepared-statement handles", |rng| {
        let h = PreparedStatementHandle {
            sql: format!("SELECT ? + {}", rng.next()),
            version: 1,
            ..PreparedStatementHandle::default()
        };
        let sealed = tickets.handle(&h).to_vec();
        assert_eq!(
            tickets.open_handle(&sealed).expect("a valid handle opens"),
            h
        );
        let changed = mutate(rng, &sealed);
        if changed != sealed {
            assert!(
                tickets.open_handle(&changed).is_err(),
                "a changed handle opens"
            );
        }
        assert!(others.open_handle(&sealed).is_err(), "bound to its owner");
        let _ = tickets.open_handle(&rng.some_bytes(300));
    });
    fuzz("write-result tickets", |rng| {
        let sealed = tickets.write_result(Bytes::from(rng.bytes(16)), rng.next());
        let any = arrow_flight::sql::Any::decode(sealed.ticket.as_ref()).expect("any");
        let value = any.value.to_vec();
        assert!(tickets.open_write_result(&value).is_ok());
        let changed = mutate(rng, &value);
        if changed != value {
            assert!(
                tickets.open_write_result(&changed).is_err(),
                "a changed ticket opens"
            );
        }
    });
}

#[test]
fn parameter_streams_never_panic() {
    let memory = ServerMemory::new(Some(64 << 20), None);
    let schema = Arc::new(Schema::new(vec![
        Field::new("0", DataType::Int64, true),
        Field::new("1", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
            Arc::new(StringArray::from(vec![Some("a"), Some("bb"), None])),
        ],
    )
    .expect("batch");
    let valid = batches_to_ipc(&schema, &[batch]).expect("ipc").to_vec();
    let rows = ParameterRows::decode(&valid, 10, &memory).expect("valid parameters");
    assert_eq!(rows.len(), 3);
    fuzz("parameter IPC", |rng| {
        let input = if rng.below(4) == 0 {
            rng.some_bytes(400)
        } else {
            mutate(rng, &valid)
        };
        if let Ok(rows) = ParameterRows::decode(&input, 1000, &memory) {
            for i in 0..rows.len() {
                let _ = rows.row(i);
            }
        }
    });
}

const FRAGMENTS: &[&str] = &[
    "SELECT ",
    "* ",
    "FROM ",
    "iceberg.db.t ",
    "\"q\"\"uoted\" ",
    "`tick` ",
    "'str''ing ? 2024-01-01 00:00:00' ",
    "'unterminated ",
    "\"unterminated ",
    "-- comment ? \n",
    "/* block ? */ ",
    "/* unterminated ",
    "? ",
    "?",
    "$1 ",
    ":name ",
    "2024-01-01 00:00:00 ",
    "2024-01-01 00:00:00.123456 ",
    "2024-13-45 99:99:99 ",
    "1999-01-01 ",
    "FOR VERSION AS OF 123 ",
    "VERSION AS OF 'b' ",
    "FOR TIMESTAMP AS OF TIMESTAMP '2026-01-01 00:00:00' ",
    "TIMESTAMP AS OF '2026-01-01T00:00:00Z' ",
    "FOR SYSTEM_TIME AS OF ",
    "AS OF ",
    "WHERE a = ",
    "AND ",
    "( ",
    ") ",
    ", ",
    "; ",
    "é ",
    "🦆 ",
    "\u{0} ",
    "\\ ",
    "x ",
    "42 ",
    "-1.5e9 ",
];

fn random_sql(rng: &mut Rng) -> String {
    let mut sql = String::new();
    for _ in 0..rng.below(24) {
        let fragment = *rng.pick(FRAGMENTS);
        sql.push_str(fragment);
        if rng.below(8) == 0 {
            // Cut a fragment at a random character boundary.
            let cut = rng.below(sql.len() + 1);
            if sql.is_char_boundary(cut) {
                sql.truncate(cut);
            }
        }
    }
    sql
}

#[test]
fn sql_front_end_never_panics_and_keeps_literals() {
    fuzz("normalize_sql", |rng| {
        let sql = random_sql(rng);
        let out = normalize_sql(&sql);
        if !sql.contains('?') && !sql.contains(':') {
            assert_eq!(out, sql, "text without ? or : is unchanged");
        }
        // A string literal without quotes, `?` or `:` inside survives whole, whatever comes
        // before it (inside an open quote or comment, its text is copied as is).
        let literal = format!("'lit{}'", rng.next());
        let with = format!("{sql} {literal}");
        let out = normalize_sql(&with);
        assert!(
            out.ends_with(&format!(" {literal}")),
            "{with:?} became {out:?}: the literal {literal} is lost"
        );
        // Where the text before is outside any quote or comment (a `?` put there becomes a
        // marker), a literal holding `?`, `:`, a bare timestamp and a doubled quote survives
        // whole too: nothing inside it is rewritten.
        let probe = normalize_sql(&format!("{sql} ?"));
        if !probe.ends_with('?') {
            let tricky = format!("'it''s ? :x 2024-01-01 00:00:00 {}'", rng.next());
            let with = format!("{sql} {tricky} ?");
            let out = normalize_sql(&with);
            let markers = out.matches('$').count() - with.matches('$').count();
            assert!(
                out.ends_with(&format!(" {tricky} ${}", markers)) && markers >= 1,
                "{with:?} became {out:?}: the literal {tricky} is changed"
            );
        }
    });
    fuzz("rewrite_time_travel", |rng| {
        let sql = random_sql(rng);
        if let Ok(out) = rewrite_time_travel(&sql) {
            let upper = sql.to_uppercase();
            if !upper.contains(" OF") {
                assert_eq!(out, sql, "text without AS OF is unchanged");
            }
        }
    });
    fuzz("order_placeholders", |rng| {
        let mut ids: Vec<String> = (0..rng.below(12))
            .map(|_| match rng.below(3) {
                0 => format!("${}", rng.below(20)),
                1 => format!("${}", rng.next()),
                _ => format!(":{}", rng.below(5)),
            })
            .collect();
        let mut before = ids.clone();
        order_placeholders(&mut ids);
        let mut after = ids.clone();
        before.sort();
        after.sort();
        assert_eq!(before, after, "a permutation");
    });
}
