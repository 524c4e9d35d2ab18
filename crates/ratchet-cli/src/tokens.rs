//! `ratchet tokens`: the API tokens `ratchet server --auth` asks for.

use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Subcommand;
use ratchet::{Store, Timestamp};
use ratchet_server::Grant;

use crate::input::rfc3339;

#[derive(Subcommand, Debug)]
pub(crate) enum TokenCommand {
    /// Make a token and print it (once: only its hash is stored).
    Create {
        /// What it is for (shown in lists).
        #[arg(long)]
        name: String,
        /// What it may do, comma-separated: read, write (includes read), admin (includes
        /// write); or worker:QUEUE, to claim and report that queue's work through the
        /// worker routes and nothing else (worker:$activities for activities).
        #[arg(long, value_delimiter = ',', required = true)]
        scope: Vec<Grant>,
    },
    /// List tokens (never their secret).
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: every server refuses it within a second.
    Revoke {
        /// The token's id (the part after `rt_`, as `list` shows it).
        id: String,
    },
}

pub(crate) async fn run(store: Arc<dyn Store>, cmd: TokenCommand) -> anyhow::Result<()> {
    match cmd {
        TokenCommand::Create { name, scope } => {
            let issued = ratchet_server::issue_token(&name, &scope, Timestamp::now())?;
            store
                .token_create(issued.record.clone())
                .await
                .context("recording the token")?;
            out!("{}", issued.token);
            eprintln!(
                "token {} ({}) with scope {}: keep it now, it is not shown again",
                issued.record.id,
                issued.record.name,
                issued.record.scopes.join(",")
            );
        }
        TokenCommand::List { json } => {
            for t in store.token_list().await? {
                if json {
                    out!(
                        "{}",
                        serde_json::json!({"id": t.id, "name": t.name, "scopes": t.scopes,
                            "created_at": rfc3339(t.created_at),
                            "revoked_at": t.revoked_at.map(rfc3339)})
                    );
                } else {
                    out!(
                        "{:<14} {:<24} {:<18} {}{}",
                        t.id,
                        t.name,
                        t.scopes.join(","),
                        rfc3339(t.created_at),
                        t.revoked_at
                            .map(|r| format!(" revoked {}", rfc3339(r)))
                            .unwrap_or_default()
                    );
                }
            }
        }
        TokenCommand::Revoke { id } => {
            if !store.token_revoke(&id, Timestamp::now()).await? {
                bail!("no token {id:?} to revoke (unknown, or revoked already)");
            }
            out!("token {id} revoked");
        }
    }
    Ok(())
}
