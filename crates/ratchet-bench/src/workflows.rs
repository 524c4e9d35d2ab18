//! `ratchet bench workflows`: the insurance example (`examples/workflows/insurance.yaml`), a
//! declarative workflow, driven by signals from quote to policy, or cancelled while it waits
//! for its underwriter so that its compensation withdraws the quote. The shapes of a published
//! .NET workflow engine's quotation-to-policy run (12 workflows, 4 at once: 3.33 workflows/s,
//! 3,478 ms on average) and quote-or-cancel run (10, 4 at once: 59.9/s, 13.5 ms).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail};
use ratchet::workflow::{Known, Workflow};
use ratchet::{Client, HistoryEvent, InstanceStatus, Ratchet, Store};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::insurance::{self, Applicant};
use super::{orchestration_config, BenchEnv, Common, Correctness, Latencies, Report};

/// Which way the workflows go.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Signals drive each workflow to a policy: the underwriter's approval, then the
    /// customer's acceptance (and one failed payment attempt, retried by the workflow).
    Policy,
    /// Each workflow is cancelled while it waits for its underwriter: its compensation
    /// withdraws the quote (`cancel_quote`) and it ends Cancelled.
    Cancel,
    /// Policy, then cancel: a report for each.
    Both,
    /// Not the example: a fan-out of 5 `call: http` to a local service answering after 10 ms,
    /// alternated with the Rust fan-out of the same shape (`bench fanout --workflow http
    /// --against-rust`): its throughput as a share of the Rust one's.
    Calls,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Policy => "policy",
            Path::Cancel => "cancel",
            Path::Both => "both",
            Path::Calls => "calls",
        }
    }

    /// The published run of this shape: workflows, workflows/s, average ms.
    fn published(self) -> (usize, f64, f64) {
        match self {
            Path::Cancel => (10, 59.9, 13.5),
            Path::Policy | Path::Both | Path::Calls => (12, 3.33, 3478.0),
        }
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct WorkflowArgs {
    /// policy, cancel, or both.
    #[arg(value_enum, default_value = "both")]
    path: Path,
    #[command(flatten)]
    common: Common,
    /// Workflows measured on each path (default: policy 12, cancel 10, as the published runs).
    #[arg(long)]
    workflows: Option<usize>,
    /// Workflows in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Workflows of each path run first, unmeasured (statements prepared, caches warm).
    #[arg(long, default_value_t = 4)]
    warmup: usize,
    /// Payment attempts that fail in each policy workflow before one succeeds; the workflow
    /// retries after 100 ms, then 200 ms.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=2))]
    payment_failures: u32,
}

pub(crate) async fn run(
    args: WorkflowArgs,
    database_url: Option<&str>,
) -> anyhow::Result<Vec<Report>> {
    if args.concurrency == 0 {
        bail!("--concurrency must be positive");
    }
    if args.workflows == Some(0) {
        bail!("--workflows must be positive");
    }
    if args.path == Path::Calls {
        return Ok(vec![
            super::fanout::calls_against_rust(args.common.clone(), database_url).await?,
        ]);
    }
    let paths = match args.path {
        Path::Both => vec![Path::Policy, Path::Cancel],
        one => vec![one],
    };
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let mut reports = Vec::new();
    for path in paths {
        let mut report = one_path(&mut env, &args, path).await?;
        env.describe(&mut report);
        super::show(&mut report);
        let (n, per_s, avg_ms) = path.published();
        out!(
            "  {:<34} {n} workflows, {per_s} workflows/s, avg {avg_ms} ms (another engine on another machine: compare the shape only)",
            "published"
        );
        reports.push(report);
    }
    env.close().await?;
    super::write_json(&args.common, &reports)?;
    Ok(reports)
}

/// The runtime: the example's activities and the workflow, compiled against them.
async fn start(store: Arc<dyn Store>, concurrency: usize) -> anyhow::Result<Ratchet> {
    let builder = insurance::register(
        Ratchet::builder()
            .store(store)
            .config(orchestration_config(concurrency)),
    );
    let workflow = Workflow::compile_with(insurance::SOURCE, &Known::from_names(&builder.names()))
        .map_err(|e| anyhow!("examples/workflows/insurance.yaml: {e}"))?;
    Ok(builder.workflow(workflow, 1).start().await?)
}

/// One path on a store of its own (so that PostgreSQL's statistics of the path are flushed
/// when its connections close): warm-up, then measured, then every workflow checked.
async fn one_path(env: &mut BenchEnv, args: &WorkflowArgs, path: Path) -> anyhow::Result<Report> {
    let store = env.store().await?;
    let ratchet = start(store.clone(), args.concurrency).await?;
    let driver = Arc::new(Driver {
        client: ratchet.client().clone(),
        path,
        payment_failures: args.payment_failures,
        started: Mutex::new(Vec::new()),
    });
    if args.warmup > 0 {
        drive(&driver, 0..args.warmup, args.concurrency).await;
        driver.forget_started();
    }
    let n = args.workflows.unwrap_or(path.published().0);
    env.begin_stats().await?;
    let before = store.stats();
    let began = Instant::now();
    let mut tally = drive(&driver, args.warmup..args.warmup + n, args.concurrency).await;
    let seconds = began.elapsed().as_secs_f64();
    let after = store.stats();
    // Outside the measured span: the compensation in each cancelled workflow's history, and
    // no workflow left unfinished.
    driver.check_after(&mut tally).await;
    ratchet.shutdown().await;
    drop((ratchet, driver));
    drop(store);
    if let Some(e) = &tally.first_miss {
        tracing::warn!(path = path.name(), "first failure: {e}");
    }

    let units = tally.ok.len() as u64;
    let per = |x: f64| if units == 0 { 0.0 } else { x / units as f64 };
    let polls = tally.polls as f64;
    let mut report = Report {
        scenario: "workflows".into(),
        mode: Some(path.name().into()),
        unit: "workflow".into(),
        units,
        seconds,
        throughput_per_s: units as f64 / seconds.max(f64::EPSILON),
        latency: tally.latencies.summary(),
        latencies: tally
            .phases
            .iter()
            .map(|(name, l)| (name.to_string(), l.summary()))
            .collect(),
        // The driver's status reads (is it waiting yet?) are not the workflow's work.
        round_trips_per_unit: per((after.round_trips - before.round_trips) as f64 - polls),
        commits_per_unit: per((after.commits - before.commits) as f64),
        correctness: tally.correctness.clone(),
        ..Report::default()
    };
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    report
        .figures
        .insert("status polls / workflow".into(), per(polls));
    report
        .figures
        .insert("signals / workflow".into(), per(tally.signals as f64));
    report.param("path", path.name());
    report.param("workflows", n);
    report.param("concurrency", args.concurrency);
    report.param("warmup", args.warmup);
    report.param("payment_failures", args.payment_failures);
    report.postgres = env.end_stats(units).await?;
    Ok(report)
}

/// Starts and steers the workflows of one path.
struct Driver {
    client: Client,
    path: Path,
    payment_failures: u32,
    /// The instances started since the last [`Driver::check_after`] (or warm-up).
    started: Mutex<Vec<String>>,
}

/// Why a workflow did not end as it should.
enum Miss {
    Failed(String),
    TimedOut(String),
}

impl From<ratchet::Error> for Miss {
    fn from(e: ratchet::Error) -> Self {
        match e {
            ratchet::Error::Timeout(_) => Miss::TimedOut(e.to_string()),
            other => Miss::Failed(other.to_string()),
        }
    }
}

/// One workflow that ended as it should.
struct Done {
    id: String,
    total: Duration,
    phases: Vec<(&'static str, Duration)>,
    polls: u64,
    signals: u64,
}

/// What the workflows of a path did.
struct Tally {
    latencies: Latencies,
    phases: BTreeMap<&'static str, Latencies>,
    /// The workflows that ended as they should (possibly failed later by `check_after`).
    ok: Vec<String>,
    polls: u64,
    signals: u64,
    correctness: Correctness,
    first_miss: Option<String>,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            latencies: Latencies::new(),
            phases: BTreeMap::new(),
            ok: Vec::new(),
            polls: 0,
            signals: 0,
            correctness: Correctness::default(),
            first_miss: None,
        }
    }
}

impl Tally {
    fn add(&mut self, outcome: Result<Done, Miss>) {
        match outcome {
            Ok(done) => {
                self.latencies.record(done.total);
                for (name, d) in done.phases {
                    self.phases
                        .entry(name)
                        .or_insert_with(Latencies::new)
                        .record(d);
                }
                self.polls += done.polls;
                self.signals += done.signals;
                self.ok.push(done.id);
            }
            Err(Miss::Failed(e)) => {
                self.correctness.failed += 1;
                self.first_miss.get_or_insert(e);
            }
            Err(Miss::TimedOut(e)) => {
                self.correctness.timed_out += 1;
                self.first_miss.get_or_insert(e);
            }
        }
    }

    /// Counts a workflow that had looked done as failed.
    fn refute(&mut self, id: &str, why: String) {
        self.ok.retain(|ok| ok != id);
        self.correctness.failed += 1;
        self.first_miss.get_or_insert(why);
    }
}

/// Runs workflows `numbers` (each number names its applicant), `concurrency` at once.
async fn drive(driver: &Arc<Driver>, numbers: std::ops::Range<usize>, concurrency: usize) -> Tally {
    let next = Arc::new(AtomicUsize::new(numbers.start));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let end = numbers.end;
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (driver, next, tally) = (driver.clone(), next.clone(), tally.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        break;
                    }
                    let outcome = driver.one(i).await;
                    tally.lock().unwrap_or_else(|p| p.into_inner()).add(outcome);
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner());
    std::mem::take(&mut *tally)
}

/// The application of workflow `i`: two claims, so the risk is medium and an underwriter
/// decides.
fn application(i: usize, payment_failures: u32) -> (Value, Applicant, u64) {
    let applicant = Applicant {
        name: format!("Applicant {i}"),
        age: 30 + (i % 40) as u32,
        credit_score: Some(720),
        claims: 2,
    };
    let coverage = 200_000 + 1_000 * i as u64;
    let input = json!({
        "applicant": applicant,
        "product": "home",
        "coverage": coverage,
        "paymentFailures": payment_failures,
    });
    (input, applicant, coverage)
}

impl Driver {
    fn note_started(&self, id: &str) {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        started.push(id.to_string());
    }

    fn forget_started(&self) {
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    async fn one(&self, i: usize) -> Result<Done, Miss> {
        match self.path {
            Path::Cancel => self.cancel(i).await,
            Path::Policy | Path::Both | Path::Calls => self.policy(i).await,
        }
    }

    /// Quote to policy: the underwriter approves once the workflow waits for it, the customer
    /// accepts once it waits for them.
    async fn policy(&self, i: usize) -> Result<Done, Miss> {
        let (input, applicant, coverage) = application(i, self.payment_failures);
        let t0 = Instant::now();
        let handle = self.client.start(insurance::WORKFLOW, input).await?;
        let id = handle.id().to_string();
        self.note_started(&id);
        let mut polls = self.until_status(&id, "awaiting underwriter").await?;
        let t1 = Instant::now();
        let approval = json!({"approved": true, "by": "bench"});
        self.client.signal(&id, "approval", approval).await?;
        polls += self.until_status(&id, "awaiting customer").await?;
        let t2 = Instant::now();
        let acceptance = json!({"accepted": true});
        self.client.signal(&id, "acceptance", acceptance).await?;
        let outcome = handle.wait(Duration::from_secs(120)).await?;
        let t3 = Instant::now();
        let output = outcome.output.unwrap_or(Value::Null);
        let premium = insurance::premium("home", coverage, &applicant);
        let issued = outcome.status == InstanceStatus::Completed
            && output["status"] == "issued"
            && output["policy"]["policyNumber"] == format!("P-{id}").as_str()
            && output["policy"]["premium"].as_u64() == premium
            && output["payment"]["attempt"].as_u64() == Some(u64::from(self.payment_failures) + 1);
        if !issued {
            return Err(Miss::Failed(format!(
                "{id} ended {:?} with {output} (error {:?}), not an issued policy",
                outcome.status, outcome.error
            )));
        }
        Ok(Done {
            id,
            total: t3 - t0,
            phases: vec![
                ("1 start to awaiting underwriter", t1 - t0),
                ("2 approval to awaiting customer", t2 - t1),
                ("3 acceptance to policy", t3 - t2),
            ],
            polls,
            signals: 2,
        })
    }

    /// Quote, then cancelled while the workflow waits for its underwriter.
    async fn cancel(&self, i: usize) -> Result<Done, Miss> {
        let (input, _, _) = application(i, self.payment_failures);
        let t0 = Instant::now();
        let handle = self.client.start(insurance::WORKFLOW, input).await?;
        let id = handle.id().to_string();
        self.note_started(&id);
        let polls = self.until_status(&id, "awaiting underwriter").await?;
        let t1 = Instant::now();
        self.client
            .cancel(&id, "the customer withdrew the application")
            .await?;
        let outcome = handle.wait(Duration::from_secs(120)).await?;
        let t2 = Instant::now();
        if outcome.status != InstanceStatus::Cancelled {
            return Err(Miss::Failed(format!(
                "{id} ended {:?} (error {:?}), not Cancelled",
                outcome.status, outcome.error
            )));
        }
        Ok(Done {
            id,
            total: t2 - t0,
            phases: vec![
                ("1 start to awaiting underwriter", t1 - t0),
                ("2 cancel to cancelled", t2 - t1),
            ],
            polls,
            signals: 0,
        })
    }

    /// Reads the instance until its custom status is `want` (what it waits for now); returns
    /// how many reads it took.
    async fn until_status(&self, id: &str, want: &str) -> Result<u64, Miss> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut polls = 0;
        loop {
            polls += 1;
            let record = self.client.status(id).await?;
            if record.custom_status.as_ref().and_then(Value::as_str) == Some(want) {
                return Ok(polls);
            }
            if record.status.is_finished() {
                return Err(Miss::Failed(format!(
                    "{id} ended {:?} (error {:?}) before it was {want}",
                    record.status, record.error
                )));
            }
            if Instant::now() > deadline {
                return Err(Miss::TimedOut(format!("{id} was never {want}")));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// After the measured span: each workflow that missed is finished (or counts as stuck),
    /// and each cancelled workflow's compensation withdrew its quote (`cancel_quote`
    /// completed in its history).
    async fn check_after(&self, tally: &mut Tally) {
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(|p| p.into_inner()));
        for id in started.iter().filter(|id| !tally.ok.contains(id)) {
            match self.client.status(id).await {
                Ok(record) if record.status.is_finished() => {}
                _ => tally.correctness.stuck += 1,
            }
        }
        if self.path != Path::Cancel {
            return;
        }
        for id in tally.ok.clone() {
            if let Err(why) = self.compensated(&id).await {
                tally.refute(&id, why);
            }
        }
    }

    /// Whether `id`'s history holds a completed `cancel_quote` of its own quote.
    async fn compensated(&self, id: &str) -> Result<(), String> {
        let history = self
            .client
            .history(id)
            .await
            .map_err(|e| format!("reading {id}'s history: {e}"))?;
        let scheduled: Vec<u32> = history
            .iter()
            .filter_map(|r| match &r.event {
                HistoryEvent::ActivityScheduled { seq, name, .. } if name == "cancel_quote" => {
                    Some(*seq)
                }
                _ => None,
            })
            .collect();
        let quote = format!("Q-{id}");
        let withdrawn = history.iter().any(|r| match &r.event {
            HistoryEvent::ActivityCompleted { seq, output } => {
                scheduled.contains(seq)
                    && output["cancelled"] == true
                    && output["quoteId"] == quote.as_str()
            }
            _ => false,
        });
        if withdrawn {
            Ok(())
        } else {
            Err(format!("{id} was cancelled without withdrawing {quote}"))
        }
    }
}
