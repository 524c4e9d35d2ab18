//! The README's example: fan out, join, a durable timer and a signal.

use ratchet::{ActivityContext, ActivityError, OrchestrationContext, OrchestrationError, Ratchet};
use std::time::Duration;

async fn greet(_ctx: ActivityContext, name: String) -> Result<String, ActivityError> {
    Ok(format!("Hello, {name}!"))
}

async fn hello(
    ctx: OrchestrationContext,
    names: Vec<String>,
) -> Result<Vec<String>, OrchestrationError> {
    let calls = names.iter().map(|n| ctx.activity::<String>("greet", n)); // fan out...
    let greetings = ratchet::join_all(calls)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?; // ...and join
    ctx.sleep(Duration::from_secs(1)).await?; // a durable timer
    let extra: String = ctx.signal("one-more").await?; // waits for a signal, buffered if early
    Ok([greetings, vec![extra]].concat())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ratchet = Ratchet::builder()
        .sqlite(std::env::temp_dir().join("ratchet-hello.db"))
        .orchestration("hello", hello)
        .activity("greet", greet)
        .start()
        .await?;
    let handle = ratchet
        .client()
        .start("hello", vec!["Ada", "Linus"])
        .await?;
    ratchet
        .client()
        .signal(handle.id(), "one-more", "Grace")
        .await?;
    let out: Vec<String> = handle.wait(Duration::from_secs(10)).await?.into_result()?;
    println!("{out:?}");
    Ok(())
}
