//! Course enrollment: many clients race to fill courses; no course ever goes over capacity
//! and no student over their limit, because each enrollment is a conditional append.
//!
//! ```text
//! cargo run --example enrollment                      # everything, on a temporary SQLite file
//! cargo run --example enrollment -- --db school.db setup
//! cargo run --example enrollment -- --db school.db clients --clients 4 --seed 7   # run several
//! cargo run --example enrollment -- --db school.db check
//! ```
//!
//! `--database-url postgres://...` (and `--schema`) uses PostgreSQL instead of a file.

mod domain;

use std::sync::Arc;

use domain::{Setup, Tally};
use ratchet::{EventStore, PostgresConfig, PostgresStore, SqliteStore, Store};

struct Args {
    db: Option<String>,
    url: Option<String>,
    schema: String,
    command: String,
    clients: u32,
    attempts: u32,
    seed: u64,
    setup: Setup,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        db: None,
        url: None,
        schema: "ratchet".into(),
        command: "all".into(),
        clients: 16,
        attempts: 40,
        seed: 1,
        setup: Setup {
            courses: 5,
            capacity: 3,
            students: 10,
            max_courses: 2,
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if !flag.starts_with("--") {
            a.command = flag;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let n = || {
            value
                .parse::<u32>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--db" => a.db = Some(value.clone()),
            "--database-url" => a.url = Some(value.clone()),
            "--schema" => a.schema = value.clone(),
            "--clients" => a.clients = n()?,
            "--attempts" => a.attempts = n()?,
            "--seed" => a.seed = u64::from(n()?),
            "--courses" => a.setup.courses = n()?,
            "--capacity" => a.setup.capacity = n()?,
            "--students" => a.setup.students = n()?,
            "--max-courses" => a.setup.max_courses = n()?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let _dir;
    let store: Arc<dyn Store> = match (&args.url, &args.db) {
        (Some(url), _) => {
            let config = PostgresConfig {
                schema: args.schema.clone(),
                ..PostgresConfig::default()
            };
            Arc::new(PostgresStore::connect_with(url, config).await?)
        }
        (None, Some(path)) => Arc::new(SqliteStore::open(path).await?),
        (None, None) => {
            let dir = tempfile::tempdir()?;
            let store = SqliteStore::open(dir.path().join("school.db")).await?;
            _dir = dir;
            Arc::new(store)
        }
    };
    let events = EventStore::new(store);
    let s = args.setup;
    match args.command.as_str() {
        "setup" => domain::define(&events, s).await?,
        "clients" => {
            let tally =
                domain::run_clients(&events, s, args.clients, args.attempts, args.seed).await?;
            print_tally(&tally);
        }
        "check" => check(&events, s).await?,
        "all" => {
            domain::define(&events, s).await?;
            println!(
                "{} courses of {} seats, {} students of at most {} courses; {} clients racing",
                s.courses, s.capacity, s.students, s.max_courses, args.clients
            );
            let tally =
                domain::run_clients(&events, s, args.clients, args.attempts, args.seed).await?;
            print_tally(&tally);
            check(&events, s).await?;
        }
        other => {
            return Err(format!("unknown command {other}: setup, clients, check or all").into())
        }
    }
    Ok(())
}

fn print_tally(tally: &Tally) {
    let mut decisions: Vec<_> = tally.decisions.iter().collect();
    decisions.sort();
    println!(
        "decisions: {decisions:?}; decided again after a conflict: {}",
        tally.conflicts
    );
}

async fn check(events: &EventStore, s: Setup) -> Result<(), Box<dyn std::error::Error>> {
    let census = domain::census(events).await?;
    let over_capacity = census
        .per_course
        .values()
        .filter(|&&n| n > u64::from(s.capacity))
        .count();
    let over_limit = census
        .per_student
        .values()
        .filter(|&&n| n > u64::from(s.max_courses))
        .count();
    let total: u64 = census.per_course.values().sum();
    println!(
        "enrollments: {total}; courses over capacity: {over_capacity}; students over their limit: {over_limit}; repeated enrollments: {}",
        census.repeats
    );
    if over_capacity + over_limit > 0 || census.repeats > 0 {
        return Err("the rules were broken".into());
    }
    Ok(())
}
