//! `ratchet demo`: a sample order workflow on the embedded store, resumable after a crash.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use ratchet::{
    ActivityContext, ActivityError, ActivityOptions, Client, IfExists, InstanceStatus,
    OrchestrationContext, OrchestrationError, Ratchet, RetryPolicy, RuntimeConfig, StartOptions,
    Store,
};
use serde::{Deserialize, Serialize};

/// Options of the demo.
#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    /// Number of orders.
    #[arg(long, default_value_t = 8)]
    orders: u32,
    /// How long each activity works, in milliseconds.
    #[arg(long, default_value_t = 150)]
    step_ms: u64,
    /// Lease length in milliseconds: after a crash, unfinished work is taken over this long after.
    #[arg(long, default_value_t = 2_000)]
    lease_ms: u64,
    /// Print no progress bar (for scripts).
    #[arg(long)]
    quiet: bool,
    /// Exit when the orders are done instead of serving the console on them.
    #[arg(long)]
    no_serve: bool,
    /// Where the console is served once the orders are done.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Order {
    id: String,
    items: Vec<String>,
    amount_cents: u64,
    step_ms: u64,
}

/// What a finished order returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct OrderResult {
    pub(crate) reservation: String,
    pub(crate) receipt: String,
    pub(crate) tracking: Vec<String>,
    pub(crate) delivered: Option<String>,
}

async fn work(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

async fn reserve_stock(_ctx: ActivityContext, order: Order) -> Result<String, ActivityError> {
    work(order.step_ms).await;
    Ok(format!("rsv-{}-{}", order.id, order.items.len()))
}

async fn charge_payment(ctx: ActivityContext, order: Order) -> Result<String, ActivityError> {
    work(order.step_ms).await;
    // The payment provider always times out once: the retry policy takes care of it.
    if ctx.attempt() == 1 {
        return Err(ActivityError::new(
            "GatewayTimeout",
            "payment gateway did not answer",
        ));
    }
    Ok(format!("pay-{}-{}c", order.id, order.amount_cents))
}

async fn ship_item(
    _ctx: ActivityContext,
    (order, item, ms): (String, String, u64),
) -> Result<String, ActivityError> {
    work(ms).await;
    Ok(format!("trk-{order}-{item}"))
}

async fn order_workflow(
    ctx: OrchestrationContext,
    order: Order,
) -> Result<OrderResult, OrchestrationError> {
    ctx.set_custom_status("reserving");
    let reservation: String = ctx.activity("reserve_stock", &order).await?;
    ctx.set_custom_status("charging");
    let retry = RetryPolicy::default()
        .max_attempts(5)
        .initial_interval(Duration::from_millis(100));
    let receipt: String = ctx
        .activity_with(
            "charge_payment",
            &order,
            ActivityOptions::default().retry(retry),
        )
        .await?;
    ctx.set_custom_status("shipping");
    let shipments = order
        .items
        .iter()
        .map(|item| ctx.activity::<String>("ship_item", (&order.id, item, order.step_ms)));
    let tracking = ratchet::join_all(shipments)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    ctx.set_custom_status("awaiting-delivery");
    let delivered = ctx
        .signal_timeout::<String>("delivered", Duration::from_secs(60))
        .await?;
    ctx.set_custom_status("done");
    Ok(OrderResult {
        reservation,
        receipt,
        tracking,
        delivered,
    })
}

/// Registers the demo's orchestration (`order`) and activities; `ratchet worker` runs them too.
pub(crate) fn register(builder: ratchet::Builder) -> ratchet::Builder {
    builder
        .orchestration("order", order_workflow)
        .activity("reserve_stock", reserve_stock)
        .activity("charge_payment", charge_payment)
        .activity("ship_item", ship_item)
}

/// The registered demo: used by `ratchet demo` and by the crash test.
pub(crate) fn builder(store: Arc<dyn Store>, lease: Duration) -> ratchet::Builder {
    let config = RuntimeConfig {
        lease,
        heartbeat: lease / 3,
        poll_interval: Duration::from_millis(250),
        ..RuntimeConfig::default()
    };
    register(Ratchet::builder().store(store).config(config))
}

fn order(n: u32, step_ms: u64) -> Order {
    let catalogue = ["kettle", "teapot", "mug", "saucer", "tray"];
    let items = (0..(n % 3 + 2))
        .map(|i| catalogue[((n + i) % 5) as usize].to_string())
        .collect();
    Order {
        id: format!("order-{n}"),
        items,
        amount_cents: 1_000 + u64::from(n) * 250,
        step_ms,
    }
}

/// Raises `delivered` for each order once it waits for it; the dedup id makes a rerun harmless.
async fn courier(client: Client, ids: Vec<String>) {
    let mut pending = ids;
    while !pending.is_empty() {
        let mut still = Vec::new();
        for id in pending {
            match client.status(&id).await {
                Ok(rec)
                    if rec.custom_status.as_ref().and_then(|s| s.as_str())
                        == Some("awaiting-delivery") =>
                {
                    let dedup = format!("delivered-{id}");
                    if let Err(e) = client
                        .signal_once(&id, "delivered", "front door", &dedup)
                        .await
                    {
                        tracing::warn!(%id, error = %e, "could not deliver");
                    }
                }
                Ok(rec) if rec.status.is_finished() => {}
                _ => still.push(id),
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn run(store: crate::OpenStore, db: &str, args: DemoArgs) -> anyhow::Result<()> {
    let store = store.into_dyn();
    let ratchet = builder(store.clone(), Duration::from_millis(args.lease_ms.max(100)))
        .start()
        .await
        .context("starting the runtime")?;
    let client = ratchet.client().clone();
    let mut resumed = 0;
    let mut ids = Vec::new();
    for n in 1..=args.orders {
        let o = order(n, args.step_ms);
        let options = StartOptions::id(&o.id).if_exists(IfExists::UseExisting);
        if client.status(&o.id).await.is_ok() {
            resumed += 1;
        }
        ids.push(
            client
                .start_with("order", &o, options)
                .await?
                .id()
                .to_string(),
        );
    }
    out!(
        "Ratchet demo on {db}: {} orders ({} new, {resumed} resumed from an earlier run)",
        ids.len(),
        ids.len() - resumed
    );
    let courier = tokio::spawn(courier(client.clone(), ids.clone()));
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(ids.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} orders done  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let mut stages: BTreeMap<String, usize> = BTreeMap::new();
        let mut done = 0;
        for id in &ids {
            let rec = client.status(id).await?;
            if rec.status.is_finished() {
                done += 1;
            } else {
                let stage = rec
                    .custom_status
                    .and_then(|s| s.as_str().map(str::to_string))
                    .unwrap_or_else(|| "queued".into());
                *stages.entry(stage).or_default() += 1;
            }
        }
        bar.set_position(done);
        bar.set_message(
            stages
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        if done as usize == ids.len() {
            break;
        }
        tokio::select! {
            _ = &mut ctrl_c => {
                bar.abandon_with_message("interrupted: releasing leases; run the demo again to resume");
                courier.abort();
                ratchet.shutdown().await;
                std::process::exit(130);
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    bar.finish_with_message("all orders finished");
    courier.abort();
    out!(
        "\n{:<10} {:<10} {:>8}  result",
        "order",
        "status",
        "history"
    );
    let mut failed = 0;
    for id in &ids {
        let rec = client.status(id).await?;
        let events = client.history(id).await?.len();
        let result = match (&rec.status, rec.output.clone()) {
            (InstanceStatus::Completed, Some(out)) => {
                let r: OrderResult = serde_json::from_value(out)?;
                format!(
                    "{}, {}, {} parcel(s), delivered: {}",
                    r.reservation,
                    r.receipt,
                    r.tracking.len(),
                    r.delivered.as_deref().unwrap_or("no")
                )
            }
            _ => {
                failed += 1;
                rec.error.map(|e| e.to_string()).unwrap_or_default()
            }
        };
        out!(
            "{:<10} {:<10} {:>8}  {result}",
            id,
            rec.status.to_string(),
            events
        );
    }
    let stats = ratchet.stats();
    out!(
        "\nstore: {} round trips, {} commits in this run",
        stats.round_trips,
        stats.commits
    );
    ratchet.shutdown().await;
    if failed > 0 {
        bail!("{failed} order(s) did not complete");
    }
    if !args.no_serve {
        // The same orders, their histories and graphs in a browser: the server (and its
        // worker) on the demo's store, until Ctrl-C.
        out!(
            "\nThe console: http://{}/ (the orders, their histories and graphs; --no-serve to exit instead)",
            args.listen
        );
        let server = crate::server::ServerArgs::local(args.listen)?;
        return crate::server::run(store, db, server).await;
    }
    Ok(())
}
